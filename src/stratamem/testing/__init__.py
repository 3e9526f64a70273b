"""Public, documented test helpers: offline fakes users' own tests can import.

Each fake lives in its own module (e.g. a fake OpenAI-compatible HTTP server
for chat and embeddings, deterministic in-process models). They are real
implementations of our protocols or real HTTP servers bound to 127.0.0.1, so
code under test runs its production path against them. Nothing here is
imported by the library itself.
"""
