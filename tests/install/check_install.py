#!/usr/bin/python3
"""`make install` staged into a scratch root (DESTDIR): every file is there,
the man pages render without warnings, the library is usable through its
pkg-config file, the installed server starts on the installed
configuration, and the systemd unit runs bloomeryd as its own user, with
its data under /var/lib, hardened, and systemd accepts it. Twice: at the
prefix the build was configured with, and at /usr as `make install
PREFIX=/usr` does (`cmake --install --prefix /usr`), where the unit, the
configuration in /etc, the man pages and the pkg-config file must all name
the paths of that install, not of the configure step.

Usage: check_install.py BUILD_DIR
"""
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from freeport import free_port  # noqa: E402

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)
    return cond


def cache_value(build, name):
    with open(os.path.join(build, "CMakeCache.txt")) as f:
        for line in f:
            if line.startswith(name + ":"):
                return line.split("=", 1)[1].strip()
    raise KeyError(name)


def sanitizer_flags(build):
    """A sanitizer build's library needs its runtime in the program too."""
    try:
        with open(os.path.join(build, "CMakeCache.txt")) as f:
            cache = f.read()
    except OSError:
        return []
    if re.search(r"^BLOOMERY_SANITIZE:BOOL=ON$", cache, re.M):
        return ["-fsanitize=address,undefined"]
    if re.search(r"^BLOOMERY_TSAN:BOOL=ON$", cache, re.M):
        return ["-fsanitize=thread"]
    return []


def main(build):
    build = os.path.abspath(build)
    configured = cache_value(build, "CMAKE_INSTALL_PREFIX")
    for prefix in dict.fromkeys([configured, "/usr"]):
        print("-- installed with the prefix %s%s" % (
            prefix, "" if prefix == configured else " (cmake --install --prefix)"))
        root = tempfile.mkdtemp(prefix="bloomery-install-")
        try:
            run(build, prefix, root, prefix != configured)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    print("%d passed, %d failed" % (0 if failures else 1, 1 if failures else 0))
    return 1 if failures else 0


def run(build, prefix, root, override):
    subprocess.run(["cmake", "--install", build] + (["--prefix", prefix] if override else []),
                   check=True, stdout=subprocess.DEVNULL, env={**os.environ, "DESTDIR": root})
    p = root + prefix
    # GNUInstallDirs: the configuration goes to /etc for the prefix /usr.
    etc = root + "/etc" if prefix == "/usr" else p + "/etc"
    if prefix == "/usr":
        check(not os.path.exists(p + "/etc"), "nothing installed in /usr/etc")
    libdir = cache_value(build, "CMAKE_INSTALL_LIBDIR")
    expect = {
        "bin/bloomeryd": True, "bin/bloomery": True,
        libdir + "/libbloomery.a": False, libdir + "/libbloomery.so.0": False,
        libdir + "/libbloomery.so": False,
        libdir + "/pkgconfig/bloomery.pc": False,
        "include/bloomery/bloomery.h": False,
        "share/man/man1/bloomeryd.1": False, "share/man/man1/bloomery.1": False,
        "share/man/man5/bloomery.conf.5": False,
        "lib/systemd/system/bloomeryd.service": False,
        "lib/sysusers.d/bloomery.conf": False,
        "share/bloomery/prometheus/bloomery.rules.yml": False,
        "share/bloomery/prometheus/bloomery.rules.test.yml": False,
        "share/bloomery/grafana/bloomery-dashboard.json": False,
    }
    for rel, exe in expect.items():
        path = os.path.join(p, rel)
        ok = os.path.exists(path) and (not exe or os.access(path, os.X_OK))
        check(ok, "installed %s" % rel)
    conf = os.path.join(etc, "bloomery/bloomery.conf")
    check(os.path.exists(conf), "installed the configuration in %s" % conf[len(root):])

    for page in ("man1/bloomeryd.1", "man1/bloomery.1", "man5/bloomery.conf.5"):
        r = subprocess.run(["groff", "-man", "-ww", "-z", os.path.join(p, "share/man", page)],
                           capture_output=True, text=True)
        check(r.returncode == 0 and r.stderr == "", "%s renders without warnings %s" %
              (page, r.stderr.strip()))
    for page in ("man1/bloomeryd.1", "man5/bloomery.conf.5"):
        with open(os.path.join(p, "share/man", page)) as f:
            check(re.search(r"^\.I %s$" % re.escape(conf[len(root):]), f.read(), re.M),
                  "%s names the installed configuration %s" % (page, conf[len(root):]))

    # The library through its pkg-config file, from the staged tree.
    env = {**os.environ, "PKG_CONFIG_PATH": os.path.join(p, libdir, "pkgconfig")}
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "bloomery"], env=env,
                           capture_output=True, text=True)
    check(flags.returncode == 0, "pkg-config finds bloomery " + flags.stderr.strip())
    for var, want in (("prefix", p), ("libdir", os.path.join(p, libdir))):
        got = subprocess.run(["pkg-config", "--variable=" + var, "bloomery"], env=env,
                             capture_output=True, text=True).stdout.strip()
        check(os.path.realpath(got) == os.path.realpath(want),
              "pkg-config's %s is the installed one: %s" % (var, got[len(root):]))
    src = os.path.join(root, "t.c")
    with open(src, "w") as f:
        f.write('#include <bloomery/bloomery.h>\n#include <stdio.h>\n'
                'int main(void) { return bloomery_strerror(BLOOMERY_OK) ? 0 : 1; }\n')
    exe = os.path.join(root, "t")
    cc = subprocess.run(["cc", src, "-o", exe] + sanitizer_flags(build) + flags.stdout.split(),
                        capture_output=True, text=True)
    check(cc.returncode == 0, "a program builds against the installed library " + cc.stderr)
    if cc.returncode == 0:
        r = subprocess.run([exe], env={**os.environ,
                                       "LD_LIBRARY_PATH": os.path.join(p, libdir)})
        check(r.returncode == 0, "and runs on the installed shared library")

    # The installed config holds the service's data directory and starts
    # the installed server (on a scratch directory and port here).
    if not os.path.exists(conf):
        print("(the installed server is not started without its configuration)")
    else:
        start(p, conf, root)

    check_unit(p, prefix, conf, root)


def start(p, conf, root):
    with open(conf) as f:
        text = f.read()
    check(re.search(r"^dir /var/lib/bloomery$", text, re.M) is not None,
          "the configuration's data directory is /var/lib/bloomery")
    port = free_port()
    data = os.path.join(root, "data")
    # A ThreadSanitizer build: its deadlock detector tracks at most 64 held
    # locks and aborts on a snapshot's capture, which holds every stripe.
    env = {**os.environ, "TSAN_OPTIONS": "detect_deadlocks=0"}
    srv = subprocess.Popen([os.path.join(p, "bin/bloomeryd"), conf, "--port", str(port),
                            "--dir", data], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           env=env)
    up = False
    deadline = time.time() + 20
    while time.time() < deadline and srv.poll() is None:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                up = s.recv(16) == b"+PONG\r\n"
                break
        except OSError:
            time.sleep(0.05)
    check(up, "the installed bloomeryd starts on the installed configuration")
    srv.terminate()
    out = srv.communicate(timeout=60)[0].decode(errors="replace")
    check(srv.returncode == 0, "and stops cleanly" + ("" if srv.returncode == 0 else ":\n" + out))


def check_unit(p, prefix, conf, root):
    unit = os.path.join(p, "lib/systemd/system/bloomeryd.service")
    with open(unit) as f:
        u = f.read()
    keys = dict(re.findall(r"^(\w+)=(.*)$", u, re.M))
    check(keys.get("ExecStart") == "%s/bin/bloomeryd %s" % (
        prefix, conf[len(root):]), "ExecStart runs the installed server on the installed "
        "configuration: " + keys.get("ExecStart", ""))
    check(keys.get("User") == "bloomery" and keys.get("Group") == "bloomery",
          "runs as the bloomery user")
    check(keys.get("StateDirectory") == "bloomery", "its data directory is /var/lib/bloomery")
    check(keys.get("StateDirectoryMode") == "0700" and keys.get("UMask") == "0077",
          "the data directory and its files are the service user's alone")
    with open(os.path.join(p, "lib/sysusers.d/bloomery.conf")) as f:
        check(re.search(r"^u bloomery ", f.read(), re.M) is not None,
              "sysusers.d creates the bloomery user")
    for k, v in (("NoNewPrivileges", "true"), ("ProtectSystem", "strict"),
                 ("ProtectHome", "true"), ("PrivateTmp", "true"), ("PrivateDevices", "true"),
                 ("CapabilityBoundingSet", ""), ("MemoryDenyWriteExecute", "true")):
        check(keys.get(k) == v, "hardened: %s=%s" % (k, v))
    sa = shutil.which("systemd-analyze")
    if sa:
        r = subprocess.run([sa, "security", "--offline=yes", unit], capture_output=True,
                           text=True)
        m = re.search(r"Overall exposure level for bloomeryd.service: ([0-9.]+)", r.stdout)
        check(m is not None and float(m.group(1)) <= 4.0,
              "systemd-analyze security: exposure %s <= 4.0" % (m.group(1) if m else "?"))
        check("Unknown" not in r.stderr and "Failed to parse" not in r.stderr,
              "systemd parses the unit " + r.stderr.strip())
        # Under the staged root as if it were /: ExecStart's program must
        # exist there, and the unit must load with the units it names (the
        # system's own, copied in: the root holds only ours).
        system_units = "/usr/lib/systemd/system"
        shutil.copytree(system_units, os.path.join(root, "etc/systemd/system"), symlinks=True,
                        ignore=shutil.ignore_patterns("bloomeryd.service"), dirs_exist_ok=True)
        r = subprocess.run([sa, "verify", "--root=" + root, "--man=no",
                            unit[len(root):]], capture_output=True, text=True)
        check(r.returncode == 0 and r.stderr.strip() == "",
              "systemd-analyze verify accepts the unit: " + (r.stdout + r.stderr).strip())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
