"""Warm-up for the drills' forkserver; imported only through ``set_forkserver_preload``.

Every drill child forks from the forkserver, so what this module loads once
is loaded in every child for free: the exact tokenizer's BPE tables (~0.7 s)
and the ``openai`` client library the crash drill's agent loop uses (~0.7 s).
Loading at import time is the point of this module; nothing else imports it.
"""

from ..tokens import get_tokenizer

get_tokenizer("o200k_base").count("warm up")

import openai  # noqa: E402,F401  (after the tokenizer: a missing openai must not skip the warm-up above)
