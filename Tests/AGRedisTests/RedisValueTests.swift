import AGRedis
import Testing

@Suite struct RedisValueTests {
    @Test func accessors() {
        #expect(RedisValue.bulk(Array("hi".utf8)).string == "hi")
        #expect(RedisValue.status("OK").string == "OK")
        #expect(RedisValue.integer(3).string == nil)
        #expect(RedisValue.bulk([0, 255]).bytes == [0, 255])
        #expect(RedisValue.integer(-7).int == -7)
        #expect(RedisValue.bulk(Array("42".utf8)).int == 42)
        #expect(RedisValue.bulk(Array("4x".utf8)).int == nil)
        #expect(RedisValue.null.isNull)
        #expect(RedisValue.array(["a", 1]).array == ["a", 1])
    }

    @Test func hashFields() {
        #expect(RedisValue.array(["f1", "v1", "f2", "v2"]).hashFields == ["f1": "v1", "f2": "v2"])
        #expect(RedisValue.array([]).hashFields == [:])
        #expect(RedisValue.array(["odd"]).hashFields == nil)
        #expect(RedisValue.array(["f", 1]).hashFields == nil)
        #expect(RedisValue.null.hashFields == nil)
    }

    @Test(arguments: [
        ("", "da39a3ee5e6b4b0d3255bfef95601890afd80709"),
        ("abc", "a9993e364706816aba3e25717850c26c9cd0d89d"),
        ("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", "84983e441c3bd26ebaae4aa1f95129e5e54670f1"),
        ("The quick brown fox jumps over the lazy dog", "2fd4e1c67a2d28fced849ee1bb76e7391b93eb12"),
    ])
    func scriptNameIsSHA1(source: String, sha1: String) {
        #expect(RedisScript(source).sha1 == sha1)
    }

    /// Lengths around the 55/56/64-byte padding boundaries and a multi-block message.
    @Test(arguments: [
        (55, "c1c8bbdc22796e28c0e15163d20899b65621d65a"),
        (56, "c2db330f6083854c99d4b5bfb6e8f29f201be699"),
        (64, "0098ba824b5c16427bd7a1122a5a442a25ec644d"),
        (1000, "291e9a6c66994949b57ba5e650361e98fc36b1ba"),
    ])
    func scriptNameIsSHA1AcrossBlockBoundaries(length: Int, sha1: String) {
        #expect(RedisScript(String(repeating: "a", count: length)).sha1 == sha1)
    }
}
