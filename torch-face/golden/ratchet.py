"""The golden harness as a CI gate while the face is incomplete: no case may stop agreeing.

`compare.py --json FILE` records every case's verdict. `not_agreeing.txt` (next to this file)
lists the cases that did not agree at the last update, one name a line with its category. This
script fails when a case outside that list does not agree (a regression: a kernel or binding
change broke something upstream and the face agreed on), and reports cases that newly agree, so
the list only shrinks (`--update` rewrites it from the current verdicts).

Only the cases the verdicts hold are judged: a run of a subset (`compare.py --slice N`,
`--module`, `--filter`) says nothing about the others, so a listed case absent from the
verdicts is neither a regression nor fixed; the summary says how many listed cases were outside
the run (and, for a slice, which slice it was). `--update` on a subset keeps the listed cases
it did not run; on a full run it drops them (they are no longer cases).

    python3 torch-face/golden/ratchet.py --json verdicts.json [--known FILE] [--update]

Exit status: 0 no regression; 1 regressions (listed); 2 bad input.
"""

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
KNOWN = os.path.join(HERE, "not_agreeing.txt")


def load_run(path):
    """(verdicts {name: (category, reason)}, slice info or None, whether the run was a subset:
    a slice, --module or --filter) of compare.py --json."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    verdicts = {c["name"]: (c["category"], c.get("reason", "")) for c in data["cases"]}
    sel = data.get("selection") or {}
    subset = bool(data.get("slice") or sel.get("module") or sel.get("filter"))
    return verdicts, data.get("slice"), subset


def load_verdicts(path):
    """{name: (category, reason)} of compare.py --json."""
    return load_run(path)[0]


def load_known(path):
    known = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.rstrip("\n")
                if line and not line.startswith("#"):
                    name, _, category = line.partition("\t")
                    known[name] = category
    return known


def write_known(path, verdicts, keep=None):
    """Rewrite the list from ``verdicts``; ``keep`` ({name: category}): listed cases the run did
    not hold, kept as they are."""
    rows = sorted([(name, cat) for name, (cat, _) in verdicts.items() if cat != "agree"] +
                  [(name, cat) for name, cat in (keep or {}).items() if name not in verdicts])
    with open(path, "w", encoding="utf-8") as f:
        f.write("# Golden cases that do not agree with upstream yet (name<TAB>category); written by\n")
        f.write("# torch-face/golden/ratchet.py --update. CI fails when a case outside this list does not agree.\n")
        for name, cat in rows:
            f.write(f"{name}\t{cat}\n")
    return len(rows)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", required=True, help="verdicts written by compare.py --json")
    ap.add_argument("--known", default=KNOWN, help="the list of cases allowed not to agree")
    ap.add_argument("--update", action="store_true", help="rewrite the list from these verdicts")
    args = ap.parse_args(argv)
    try:
        verdicts, slice_info, subset = load_run(args.json)
    except (OSError, ValueError, KeyError) as e:
        print(f"ratchet: cannot read verdicts {args.json}: {e}", file=sys.stderr)
        return 2
    if not verdicts:
        print("ratchet: no verdicts (did the harness run?)", file=sys.stderr)
        return 2
    known = load_known(args.known)
    outside = [n for n in known if n not in verdicts]
    scope = ""
    if slice_info:
        scope = " (a slice 1/%d: %d of %d cases)" % (slice_info["n"], slice_info["kept"],
                                                     slice_info["total"])
    if args.update:
        # a full run holds every case: a listed case it lacks no longer exists
        keep = {k: known[k] for k in outside} if subset else {}
        n = write_known(args.known, verdicts, keep=keep)
        print(f"ratchet: {args.known} now lists {n} non-agreeing cases of {len(verdicts)} run{scope}"
              f"; {len(outside)} listed cases outside the run "
              f"{'kept (a subset)' if subset else 'dropped (no longer cases)'}")
        return 0
    regressions = [(n, c, r) for n, (c, r) in sorted(verdicts.items()) if c != "agree" and n not in known]
    fixed = [n for n in known if n in verdicts and verdicts[n][0] == "agree"]
    agree = sum(1 for c, _ in verdicts.values() if c == "agree")
    print(f"ratchet: {agree} of {len(verdicts)} cases agree{scope}; {len(known)} listed as not "
          f"agreeing, {len(outside)} of them outside this run (not judged); {len(fixed)} of those "
          f"run agree now; {len(regressions)} regressions")
    for name, cat, reason in regressions[:50]:
        print(f"  REGRESSION {name}: {cat}: {reason[:200]}")
    if fixed:
        print(f"ratchet: {len(fixed)} listed cases agree now: run with --update to shrink the list")
    return 1 if regressions else 0


if __name__ == "__main__":
    sys.exit(main())
