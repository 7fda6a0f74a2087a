#!/usr/bin/env python3
"""Print a short digest of a failed `go test` log: which tests failed and why,
and for a crash (panic, fatal error, fault) its first lines and the top frames
of the goroutine that crashed. CI shows only the end of its output, and a
crashing test binary ends with thousands of lines of other goroutines' stacks;
the digest comes last, so the cause is what the end shows."""
import re
import sys

MAX_FRAMES = 8


def frames(lines, start):
    """Function names and file:line of the goroutine block from start."""
    out = []
    i = start + 1
    while i < len(lines) and len(out) < MAX_FRAMES:
        fn = lines[i].rstrip()
        if not fn or fn.startswith("goroutine "):
            break
        loc = lines[i + 1].strip() if i + 1 < len(lines) else ""
        loc = re.sub(r" fp=.*$", "", loc)
        out.append(f"    {re.sub(r'[(][^()]*[)]$', '()', fn)}  {loc}")
        i += 2
    return out


def main(path):
    lines = open(path, errors="replace").read().splitlines()
    digest = []
    fails = [l.strip() for l in lines if l.lstrip().startswith("--- FAIL")]
    digest += fails[:10]
    errs = [l.strip() for l in lines if re.match(r"\s+Error:\s", l)]
    digest += errs[:5]
    for i, l in enumerate(lines):
        if re.match(r"(panic: |fatal error: |unexpected fault address|\[signal |runtime: )", l):
            digest += [l.rstrip() for l in lines[max(0, i - 1):i + 3]]
            for j in range(i, min(len(lines), i + 400)):
                if re.match(r"goroutine \d+ .*\[running", lines[j]):
                    digest.append(lines[j].rstrip())
                    digest += frames(lines, j)
                    break
            break
    digest += [l.strip() for l in lines if re.match(r"FAIL\s+\S+", l)][:10]
    print("== failure digest (the whole log is above)")
    seen = set()
    for l in digest:
        if l not in seen:
            seen.add(l)
            print(l[:300])


if __name__ == "__main__":
    main(sys.argv[1])
