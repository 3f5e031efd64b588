// AGRedisTests
