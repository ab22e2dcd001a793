#!/usr/bin/env python3
"""Prints a `blindspot stress` report (JSON) as the markdown report cards of BENCHMARKS.md.

    python3 scripts/report_card.py results.json
"""
import json
import sys

MARK = {"pass": "✓", "fail": "✗ fail", "non_monotone": "↯ non-mono"}
NAMES = {"bleu": "BLEU", "chrf": "chrF", "rouge1": "ROUGE-1", "rouge2": "ROUGE-2", "rougeL": "ROUGE-L",
         "bertscore-p": "BERTScore P", "bertscore-r": "BERTScore R", "bertscore-f": "BERTScore F"}


def main(path):
    report = json.load(open(path))
    ids = [m["id"] for m in report["metrics"]]
    print("| injection | " + " | ".join(NAMES.get(i, i) for i in ids) + " |")
    print("|---|" + "---|" * len(ids))
    for test in report["tests"]:
        cells = ["n/a"] * len(ids) if test["skipped"] else [MARK[v] for v in test["verdicts"]]
        print(f"| {test['injection']} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1])
