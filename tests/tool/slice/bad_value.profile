nnlens-profile 1
granularity channel
fingerprint 1
samples 2
tensors 1
tensor 5 input
1 2 x 4 5
