"""Provider token counts per ``o200k_base`` token on LoCoMo: where ``PROVIDER_FACTORS`` comes from.

Counts the text of every LoCoMo turn (read at run time from ``../shared/data``)
with ``o200k_base`` (OpenAI's encoding, our counter), ``cl100k_base`` and, when
Node and the npm package ``@anthropic-ai/tokenizer`` are available, the
tokenizer Anthropic published. Prints each total and its ratio to
``o200k_base``, beside the factor ``stratamem.tokens.PROVIDER_FACTORS`` uses.

    npm install --prefix /tmp/claude-tok @anthropic-ai/tokenizer
    .venv/bin/python benchmarks/provider_ratio.py --node-modules /tmp/claude-tok/node_modules
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.locomo.protocol import LOCOMO_PATH
from stratamem.tokens import PROVIDER_FACTORS, get_tokenizer

_NODE = """
const {getTokenizer} = require(process.argv[1] + '/@anthropic-ai/tokenizer');
const texts = JSON.parse(require('fs').readFileSync(process.argv[2], 'utf8'));
const tok = getTokenizer();
let total = 0;
for (const t of texts) total += tok.encode(t.normalize('NFKC'), 'all').length;
tok.free();
console.log(total);
"""


def locomo_texts() -> list[str]:
    """Every turn text of the ten LoCoMo conversations, in order."""
    data = json.loads(Path(LOCOMO_PATH).read_text(encoding="utf-8"))
    return [
        turn["text"]
        for sample in data
        for key, value in sample["conversation"].items()
        if key.startswith("session_") and isinstance(value, list)
        for turn in value
    ]


def claude_count(texts: list[str], node_modules: str) -> int | None:
    """Tokens of ``texts`` by Anthropic's published tokenizer, or ``None`` without Node or the package."""
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "texts.json"
        data.write_text(json.dumps(texts), encoding="utf-8")
        try:
            out = subprocess.run(
                ["node", "-e", _NODE, node_modules, str(data)], capture_output=True, text=True, timeout=600, check=True
            )
        except (OSError, subprocess.CalledProcessError) as exc:
            print(f"(Anthropic tokenizer not run: {exc})", file=sys.stderr)
            return None
    return int(out.stdout.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--node-modules", default="/tmp/claude-tok/node_modules", help="node_modules holding @anthropic-ai/tokenizer"
    )
    args = parser.parse_args()
    texts = locomo_texts()
    o200k = sum(get_tokenizer("o200k_base").count(t) for t in texts)
    rows = [("o200k_base (counter)", o200k), ("cl100k_base", sum(get_tokenizer("cl100k_base").count(t) for t in texts))]
    claude = claude_count(texts, args.node_modules)
    if claude is not None:
        rows.append(("@anthropic-ai/tokenizer", claude))
    print(f"LoCoMo: {len(texts):,} turn texts\n")
    print("| tokenizer | tokens | per o200k token | factor used |\n|---|---:|---:|---:|")
    for name, n in rows:
        used = PROVIDER_FACTORS["anthropic"] if name.startswith("@anthropic") else ""
        print(f"| {name} | {n:,} | {n / o200k:.4f} | {used} |")


if __name__ == "__main__":
    main()
