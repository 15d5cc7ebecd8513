#!/usr/bin/env python3
"""A fake training loop with tqdm. The one line that makes it report to the
MCP host is the import: ``from mcp_progress import tqdm`` instead of
``from tqdm import tqdm``. Without tqdm installed it still runs (and still
reports); without $MCP_PROGRESS_TOKEN it reports nothing.

    mcp-progress run -- python3 examples/train.py --epochs 3
"""
import argparse
import math
import os
import random
import sys
import time

# mcp_progress.py is one file: next to your script it needs no line like this.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))
from mcp_progress import tqdm  # noqa: E402  (was: from tqdm import tqdm)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=60, help="batches per epoch")
    parser.add_argument("--delay", type=float, default=0.03, help="seconds per batch")
    args = parser.parse_args()
    loss = 2.5
    for epoch in tqdm(range(args.epochs), desc="epochs"):
        batches = tqdm(range(args.steps), desc="epoch %d" % (epoch + 1), leave=False)
        for _ in batches:
            time.sleep(args.delay)
            loss = max(0.05, loss * 0.995 + random.uniform(-0.01, 0.01))
            batches.set_postfix(loss="%.3f" % loss)
    print("final loss %.3f (perplexity %.2f)" % (loss, math.exp(loss)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
