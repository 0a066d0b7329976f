"""The files a new workspace is laid out from (templates, not library code; see create.py)."""
