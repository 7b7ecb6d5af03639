"""Statements of the compatibility references checked one by one where the
other suites do not already: expiry options with past times, FLUSH modes,
RedisBloom's classic dump edges, BF.INSERT's first-letter options, the
bf-error-rate cap, HELLO in RESP2, long unknown commands."""
import pytest

from conftest import RawClient, RespError


@pytest.fixture
def c(server, r):
    cl = server.raw()
    yield cl
    cl.close()


def text(reply):
    assert isinstance(reply, RespError), reply
    return str(reply)


def test_expire_options_decide_before_a_past_time_deletes(c):
    c.cmd("BF.ADD", "k", "x")
    assert c.cmd("EXPIRE", "k", "-5", "XX") == 0      # no expiry: XX fails, key stays
    assert c.cmd("EXISTS", "k") == 1
    assert c.cmd("EXPIRE", "k", "-5", "GT") == 0      # no expiry is infinite
    assert c.cmd("EXISTS", "k") == 1
    assert c.cmd("EXPIRE", "k", "0", "LT") == 1       # deleted
    assert c.cmd("EXISTS", "k") == 0
    c.cmd("BF.ADD", "k", "x")
    assert c.cmd("EXPIRE", "k", "100") == 1
    assert c.cmd("EXPIRE", "k", "-5", "NX") == 0      # has one: NX fails
    assert c.cmd("EXISTS", "k") == 1
    assert c.cmd("EXPIRE", "k", "0", "XX") == 1
    assert c.cmd("EXISTS", "k") == 0
    for cmd, when in [("EXPIRE", "0"), ("PEXPIRE", "0"), ("EXPIREAT", "1"), ("PEXPIREAT", "0"),
                      ("PEXPIRE", "-1")]:
        c.cmd("PFADD", "h", "a")
        assert c.cmd(cmd, "h", when) == 1, cmd
        assert c.cmd("EXISTS", "h") == 0, cmd
        assert c.cmd(cmd, "h", when) == 0, cmd     # missing key


@pytest.mark.parametrize("cmd", ["FLUSHDB", "FLUSHALL"])
@pytest.mark.parametrize("mode", [[], ["ASYNC"], ["SYNC"], ["async"]])
def test_flush_modes(c, cmd, mode):
    c.cmd("BF.ADD", "a", "x")
    c.cmd("PFADD", "b", "x")
    assert c.cmd(cmd, *mode) == "OK"
    assert c.cmd("DBSIZE") == 0
    assert text(c.cmd(cmd, "LAZY")) == "ERR syntax error"


def test_classic_dump_edges(c):
    # 10 items at 0.005: 110 bits, one 16-byte link.
    c.cmd("BF.RESERVE", "cl", "0.01", "10", "LAYOUT", "CLASSIC")
    it, header = c.cmd("BF.SCANDUMP", "cl", 0)
    assert it == 1 and len(header) == 20 + 53
    assert c.cmd("BF.SCANDUMP", "cl", 1) == [17, bytes(16)]
    assert c.cmd("BF.SCANDUMP", "cl", 17) == [0, b""]
    assert c.cmd("BF.SCANDUMP", "cl", 1000) == [0, b""]
    # LOADCHUNK's checks in RedisBloom's order.
    assert text(c.cmd("BF.LOADCHUNK", "cl", 0, "a")) == "ERR received bad data"
    assert text(c.cmd("BF.LOADCHUNK", "cl", -3, "a")) == "ERR received bad data"
    assert text(c.cmd("BF.LOADCHUNK", "cl", 5, "abcdef")) == "ERR received bad data"
    assert text(c.cmd("BF.LOADCHUNK", "cl", 1, header)) == "ERR received bad data"
    assert text(c.cmd("BF.LOADCHUNK", "cl", 16, b"x" * 16)) == "ERR invalid offset - no link found"
    assert text(c.cmd("BF.LOADCHUNK", "cl", 18, "")) == "ERR invalid offset - no link found"
    assert text(c.cmd("BF.LOADCHUNK", "cl", 19, "ab")) == "ERR invalid offset - no link found"
    assert text(c.cmd("BF.LOADCHUNK", "cl", 18, "ab")) == \
        "ERR invalid chunk - Too big for current filter"
    assert c.cmd("BF.LOADCHUNK", "cl", 1, "") == "OK"
    ones = b"\xff" * 16
    assert c.cmd("BF.LOADCHUNK", "cl", 17, ones) == "OK"
    assert c.cmd("BF.EXISTS", "cl", "anything") == 1
    assert c.cmd("BF.SCANDUMP", "cl", 1) == [17, ones]
    # A data chunk before any header.
    assert text(c.cmd("BF.LOADCHUNK", "none", 17, ones)) == "ERR not found"


@pytest.mark.parametrize("opts,check", [
    (["iTeMs"], None),
    (["CAPx", "50", "i"], ("CAPACITY", 50)),
    (["ERRORS", "0.1", "ITEMS"], None),
    (["EXPANDED", "5", "ITEMS"], ("EXPANSION", 5)),
    (["e", "6", "ITEMS"], ("EXPANSION", 6)),
    (["NOPE", "ITEMS"], ("EXPANSION", None)),   # 'n', third letter not 'c': NONSCALING
    (["n", "ITEMS"], ("EXPANSION", None)),
])
def test_insert_options_by_first_letters(c, opts, check):
    assert c.cmd("BF.INSERT", "ins", *opts, "a") == [1]
    if check:
        assert c.cmd("BF.INFO", "ins", check[0]) == [check[1]]


def test_insert_nocreate_spellings(c):
    for word in ["NOCREATE", "nocx", "NOC"]:
        assert text(c.cmd("BF.INSERT", "missing", word, "ITEMS", "a")) == "ERR not found"
    assert text(c.cmd("BF.INSERT", "k", "XYZ", "ITEMS", "a")) == "Unknown argument received"
    assert text(c.cmd("BF.INSERT", "k", "ITEMS")) == \
        "ERR wrong number of arguments for 'bf.insert' command"


def test_capacity_range_both_ends(c):
    assert c.cmd("BF.RESERVE", "one", "0.01", "1") == "OK"
    assert c.cmd("BF.INFO", "one", "CAPACITY") == [1]
    assert text(c.cmd("BF.INSERT", "big", "CAPACITY", "0", "ITEMS", "a")) == "Bad argument received"
    assert c.cmd("EXISTS", "big") == 0


def test_default_error_rate_capped_at_a_quarter(c):
    try:
        assert c.cmd("CONFIG", "SET", "bf-error-rate", "0.5") == "OK"
        assert c.cmd("CONFIG", "GET", "bf-error-rate") == [b"bf-error-rate", b"0.25"]
        assert text(c.cmd("CONFIG", "SET", "bf-error-rate", "1")).startswith(
            "ERR CONFIG SET failed (possibly related to argument 'bf-error-rate')")
    finally:
        c.cmd("CONFIG", "SET", "bf-error-rate", "0.01")


def test_info_single_fields_in_both_protocols(c):
    c.cmd("BF.RESERVE", "f", "0.01", "100", "LAYOUT", "CLASSIC")
    c.cmd("BF.ADD", "f", "a")
    names = {"CAPACITY": "Capacity", "SIZE": "Size", "FILTERS": "Number of filters",
             "ITEMS": "Number of items inserted", "EXPANSION": "Expansion rate"}
    values = {"CAPACITY": 100, "SIZE": 240, "FILTERS": 1, "ITEMS": 1, "EXPANSION": 2}
    for field, name in names.items():
        assert c.cmd("BF.INFO", "f", field.lower()) == [values[field]]
    c.cmd("HELLO", "3")
    for field, name in names.items():
        assert c.cmd("BF.INFO", "f", field) == {name: values[field]}
    assert c.cmd("BF.CARD", "f") == 1
    c.cmd("HELLO", "2")


def test_hello_resp2_is_a_flat_array(c):
    hello = c.cmd("HELLO")
    d = dict(zip(hello[::2], hello[1::2]))
    assert d[b"server"] == b"redis" and d[b"version"] == b"7.4.0" and d[b"proto"] == 2
    assert d[b"mode"] == b"standalone" and d[b"role"] == b"master"
    assert d[b"id"] == c.cmd("CLIENT", "ID")
    assert [b"name", b"bf"] == d[b"modules"][0][:2]


def test_unknown_command_truncates_and_sanitizes(c):
    got = text(c.cmd("FOO", "a\r\nb", "x" * 200, "never"))
    assert got == "ERR unknown command 'FOO', with args beginning with: 'a  b' '%s' " % ("x" * 121)
    assert text(c.cmd("Y" * 200)) == \
        "ERR unknown command '%s', with args beginning with: " % ("Y" * 128)


def test_client_setinfo(c):
    assert c.cmd("CLIENT", "SETINFO", "lib-name", "redis-py") == "OK"
    assert c.cmd("CLIENT", "SETINFO", "LIB-VER", "5.0.1") == "OK"
    assert text(c.cmd("CLIENT", "SETINFO", "FOO", "1")) == "ERR Unrecognized option 'FOO'"
    assert b"lib-name=redis-py lib-ver=5.0.1" in c.cmd("CLIENT", "INFO")


def test_command_docs_never_errors(c):
    assert isinstance(c.cmd("COMMAND", "DOCS"), list)
    docs = c.cmd("COMMAND", "DOCS", "BF.ADD", "nosuch")
    assert docs[0] == b"bf.add" and len(docs) == 2


def test_type_names(c):
    c.cmd("BF.ADD", "b", "x")
    c.cmd("BF.RESERVE", "cnt", "0.01", "10", "COUNTING")
    c.cmd("PFADD", "h", "x")
    assert [c.cmd("TYPE", k) for k in ("b", "cnt", "h", "none")] == \
        ["MBbloom--", "MBbloom--", "string", "none"]

    def scan(t):
        out, cursor = [], b"0"
        while True:
            cursor, keys = c.cmd("SCAN", cursor, "TYPE", t)
            out += keys
            if cursor == b"0":
                return sorted(out)
    assert scan("MBbloom--") == [b"b", b"cnt"]
    assert scan("string") == [b"h"]


def test_command_info_flags_as_redisbloom(c):
    """RedisBloom registers BF.RESERVE/ADD/MADD/INSERT/LOADCHUNK as "write
    deny-oom", the readers as "readonly fast", one key at argv[1]; ACL
    categories as Redis lists them: those its flags give (@write, @read,
    @fast or @slow) and Redis 8's @bloom."""
    for name in ["bf.reserve", "bf.add", "bf.madd", "bf.insert", "bf.loadchunk"]:
        info = c.cmd("COMMAND", "INFO", name)[0]
        assert sorted(info[2]) == ["denyoom", "write"], name
        assert info[3:6] == [1, 1, 1], name
        assert "@write" in info[6] and "@bloom" in info[6] and "@read" not in info[6], name
    for name in ["bf.exists", "bf.mexists", "bf.info", "bf.card", "bf.scandump", "bf.debug"]:
        info = c.cmd("COMMAND", "INFO", name)[0]
        assert sorted(info[2]) == ["fast", "readonly"], name
        assert info[3:6] == [1, 1, 1], name
        assert sorted(info[6]) == ["@bloom", "@fast", "@read"], name
