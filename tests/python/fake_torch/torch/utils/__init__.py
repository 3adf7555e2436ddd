"""torch.utils of the stand-in: hooks only."""
