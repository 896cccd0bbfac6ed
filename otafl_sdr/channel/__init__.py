"""Channel models as plain numpy (no hidden state): block fading, AWGN, the reference `sim` air."""
