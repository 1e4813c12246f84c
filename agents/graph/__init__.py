"""Graph capture (torch.export on the meta device) and the torch-free graph IR."""
