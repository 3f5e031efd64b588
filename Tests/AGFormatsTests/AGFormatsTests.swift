// AGFormatsTests
