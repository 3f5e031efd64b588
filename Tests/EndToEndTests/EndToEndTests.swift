// EndToEndTests
