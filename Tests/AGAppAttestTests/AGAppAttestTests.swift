// AGAppAttestTests
