// AGCryptoTests
