// AGRedis
