nnlens-profile 1
granularity per-pixel
fingerprint 1
samples 1
tensors 0
