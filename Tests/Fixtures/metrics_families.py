#!/usr/bin/env python3
"""Independent reader of the gateway's /metrics for the end-to-end tests: the Prometheus
project's own Python parser (prometheus_client) reads the exposition given as argv[1] and
prints one line per sample, "type name{labels} value", labels sorted, in the parser's spelling
(integral values as integers);
a text it refuses exits 1 with the parser's error.
Usage: metrics_families.py EXPOSITION"""
import sys

from prometheus_client.parser import text_string_to_metric_families


def main() -> int:
    try:
        families = list(text_string_to_metric_families(sys.argv[1]))
    except Exception as error:  # the parser raises ValueError and friends
        print(f"refused: {error}", file=sys.stderr)
        return 1
    for family in families:
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            value = sample.value
            text = str(int(value)) if float(value).is_integer() else repr(value)
            print(f"{family.type} {sample.name}{{{labels}}} {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
