// AGCrypto
