"""Fail when any pin in requirements.txt is missing or at another version in this venv.

`pip check` only checks that what *is* installed is consistent; a pip run that died half
way (a dropped connection, a full disk) leaves a consistent but incomplete venv that it
passes. This is the check that would have named the missing package.
"""
import re
import sys
from importlib import metadata


def main(*paths: str) -> int:
    wrong = []
    lines = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            lines += f.read().splitlines()
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, _, want = line.partition("==")
        name = re.sub(r"\[.*\]", "", name).strip()
        try:
            have = metadata.version(name)
        except metadata.PackageNotFoundError:
            wrong.append(f"{name}=={want} (not installed)")
            continue
        # Local version labels (+cpu, +cu130) are the same release for our purpose.
        if want and have.split("+")[0] != want.split("+")[0]:
            wrong.append(f"{name}=={want} (found {have})")
    if wrong:
        print(f"{len(wrong)} pinned package(s) missing or wrong in .venv: " + ", ".join(wrong),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(*(sys.argv[1:] or ["requirements.txt"])))
