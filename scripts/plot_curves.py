#!/usr/bin/env python3
"""Training curves from stringrun logs (stringrun train --log FILE.csv).

    plot_curves.py LOG.csv [LOG2.csv ...] -o curves.png

Draws, against the step, each quantity the logs have: the training loss
(with the evaluation loss as dots), the test accuracy or perplexity (and,
for a model with an EMA of its weights, the EMA weights' as a dashed line),
and the learning rate. Several logs are drawn side by side, one line per run in each
panel, labelled by file name. Needs matplotlib (Debian: python3-matplotlib).
Exit status 0, 1 on a missing or malformed log, 2 on bad usage.
"""
import argparse
import csv
import os
import sys

# The log's columns (runtime/src/core/training/TrainLog.h, kTrainLogHeader).
HEADER = ["kind", "step", "epoch", "loss", "lr", "grad_norm", "accuracy",
          "perplexity", "units_per_s"]

# (panel title, row kind, column, factor, y-axis scale) in drawing order.
# The log holds accuracy as a fraction; it is drawn in percent.
PANELS = [
    ("loss", "train", "loss", 1, "linear"),
    ("test accuracy (%)", "eval", "accuracy", 100, "linear"),
    ("test perplexity", "eval", "perplexity", 1, "log"),
    ("learning rate", "train", "lr", 1, "linear"),
]


class LogError(Exception):
    pass


def read_log(path):
    """{(kind, column): ([steps], [values])} of one log's non-empty cells."""
    try:
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
    except OSError as e:
        raise LogError(f"{path}: cannot read: {e.strerror}")
    except (UnicodeDecodeError, csv.Error) as e:
        raise LogError(f"{path}: not a CSV file: {e}")
    if not rows or rows[0] != HEADER:
        first = ",".join(rows[0]) if rows else "(empty file)"
        raise LogError(f"{path}: not a stringrun training log: its first line is "
                       f"'{first}', expected '{','.join(HEADER)}'")
    series = {}
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != len(HEADER):
            raise LogError(f"{path}:{number}: {len(row)} fields, expected "
                           f"{len(HEADER)}")
        kind = row[0]
        if kind not in ("train", "eval", "eval_ema"):
            raise LogError(f"{path}:{number}: unknown row kind '{kind}' "
                           f"(expected train, eval or eval_ema)")
        try:
            step = int(row[1])
        except ValueError:
            raise LogError(f"{path}:{number}: step '{row[1]}' is not an integer")
        for column, cell in zip(HEADER[3:], row[3:]):
            if cell == "":
                continue
            try:
                value = float(cell)
            except ValueError:
                raise LogError(f"{path}:{number}: {column} '{cell}' is not a number")
            steps, values = series.setdefault((kind, column), ([], []))
            steps.append(step)
            values.append(value)
    if not series:
        raise LogError(f"{path}: the log has no rows")
    return series


def run_labels(paths):
    """File names without .csv; whole paths where two names are the same."""
    names = [os.path.splitext(os.path.basename(p))[0] for p in paths]
    return [p if names.count(n) > 1 else n for p, n in zip(paths, names)]


def plot(logs, labels, out):
    import matplotlib
    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    panels = [p for p in PANELS
              if any((p[1], p[2]) in log for log in logs)]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 3.6),
                             squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (title, kind, column, factor, scale) in zip(axes[0], panels):
        for i, (log, label) in enumerate(zip(logs, labels)):
            color = colors[i % len(colors)]
            if (kind, column) in log:
                steps, values = log[(kind, column)]
                ax.plot(steps, [v * factor for v in values], color=color, label=label,
                        marker="o" if kind == "eval" else None, linewidth=1.2)
            if kind == "eval" and ("eval_ema", column) in log:
                steps, values = log[("eval_ema", column)]
                ax.plot(steps, [v * factor for v in values], "--", color=color,
                        marker="s", markersize=3, linewidth=1.0, label=f"{label} (EMA)")
            if column == "loss" and ("eval", "loss") in log:
                steps, values = log[("eval", "loss")]
                ax.plot(steps, values, "o", color=color, markersize=4,
                        label=f"{label} (test)")
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.set_yscale(scale)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(
        description="Plot stringrun training logs (loss, accuracy or "
                    "perplexity, learning rate) against the step.")
    parser.add_argument("logs", nargs="+", metavar="LOG.csv")
    parser.add_argument("-o", "--output", required=True, metavar="PNG")
    args = parser.parse_args()
    try:
        logs = [read_log(p) for p in args.logs]
    except LogError as e:
        print(f"plot_curves: error: {e}", file=sys.stderr)
        return 1
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("plot_curves: error: matplotlib is not installed (Debian: "
              "apt-get install python3-matplotlib)", file=sys.stderr)
        return 1
    try:
        plot(logs, run_labels(args.logs), args.output)
    except OSError as e:
        print(f"plot_curves: error: {args.output}: cannot write: {e.strerror}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
