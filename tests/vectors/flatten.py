#!/usr/bin/python3
"""Flatten a JSON file into lines "path<TAB>kind<TAB>value" so C tests can read
test vectors without a JSON parser. Paths join object keys and array indices
with dots (filters.0.items.3); kind is s (string, value hex-encoded UTF-8),
i (integer), f (float), b (bool 0/1), n (null), or a/o with the element count
for arrays and objects."""
import json
import sys


def walk(path, v, out):
    if isinstance(v, bool):
        out.append((path, "b", "1" if v else "0"))
    elif isinstance(v, int):
        out.append((path, "i", str(v)))
    elif isinstance(v, float):
        out.append((path, "f", repr(v)))
    elif v is None:
        out.append((path, "n", ""))
    elif isinstance(v, str):
        out.append((path, "s", v.encode().hex()))
    elif isinstance(v, list):
        out.append((path, "a", str(len(v))))
        for i, x in enumerate(v):
            walk(f"{path}.{i}" if path else str(i), x, out)
    else:
        out.append((path, "o", str(len(v))))
        for k, x in v.items():
            walk(f"{path}.{k}" if path else k, x, out)


def main():
    with open(sys.argv[1]) as f:
        data = json.load(f)
    out = []
    walk("", data, out)
    with open(sys.argv[2], "w") as f:
        for p, k, v in out:
            f.write(f"{p}\t{k}\t{v}\n")


if __name__ == "__main__":
    main()
