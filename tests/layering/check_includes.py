"""The stack runs one way (docs/ARCHITECTURE.md, "Libraries and dependencies"): every #include of
a project header must name a folder its own folder may depend on. Reads every source and header
of the project's library folders and prints each include that runs back up the stack; exit 1
when there is one.

Run: python3 check_includes.py [ROOT] (ROOT: the repository, default two folders up), or
--self-test, which builds a small tree with one include up the stack and expects it caught.
"""

import os
import re
import sys
import tempfile

# Each folder (longest prefix wins) and the folders its files may include, below it or its own.
BELOW = {
    "framework/": ["framework/"],
    "parallel/": ["framework/", "parallel/"],
    "layers/": ["framework/", "parallel/", "layers/"],
    "optimizers/": ["framework/", "parallel/", "optimizers/"],
    "launch/runtime/": ["framework/", "parallel/", "layers/", "optimizers/", "launch/runtime/"],
    "launch/training/": ["framework/", "parallel/", "layers/", "optimizers/", "launch/runtime/",
                         "launch/training/"],
    "launch/inference/": ["framework/", "parallel/", "layers/", "optimizers/", "launch/runtime/",
                          "launch/inference/"],
    "launch/serving/": ["framework/", "parallel/", "layers/", "optimizers/", "launch/runtime/",
                        "launch/inference/", "launch/serving/"],
    "launch/calibration/": ["framework/", "parallel/", "layers/", "optimizers/",
                            "launch/runtime/", "launch/calibration/"],
    "launch/programs/": ["framework/", "parallel/", "layers/", "optimizers/", "launch/"],
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def folder_of(path):
    best = None
    for folder in BELOW:
        if path.startswith(folder) and (best is None or len(folder) > len(best)):
            best = folder
    return best


def violations(root):
    found = []
    for top in ("framework", "parallel", "layers", "optimizers", "launch"):
        for directory, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith((".h", ".cpp", ".cu", ".cuh")):
                    continue
                path = os.path.relpath(os.path.join(directory, name), root)
                own = folder_of(path)
                if own is None:
                    continue
                with open(os.path.join(root, path), errors="replace") as f:
                    text = f.read()
                for target in INCLUDE.findall(text):
                    if folder_of(target) is None:
                        continue  # not a project header (a system or third-party one)
                    if not any(target.startswith(allowed) for allowed in BELOW[own]):
                        found.append(f"{path} includes {target}")
    return found


def self_test():
    with tempfile.TemporaryDirectory() as root:
        for path, text in (("framework/a.h", '#include "framework/b.h"\n'),
                           ("parallel/p.cpp", '#include "framework/a.h"\n'),
                           ("layers/l.h", '#include "launch/training/t.h"\n')):
            os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
            with open(os.path.join(root, path), "w") as f:
                f.write(text)
        found = violations(root)
        assert found == ["layers/l.h includes launch/training/t.h"], found
    print("self-test: an include up the stack is caught")


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return 0
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    found = violations(os.path.abspath(root))
    for line in found:
        print("up the stack: " + line)
    print(f"{len(found)} includes up the stack")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
