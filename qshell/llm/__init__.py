"""Model providers behind one `Provider` protocol (see `base.py`), and the message values."""
