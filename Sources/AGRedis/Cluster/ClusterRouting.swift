/// Where a command goes in a cluster, decided from its name and key arguments.
enum ClusterRoute: Equatable {
    /// Every key hashes to this slot.
    case slot(UInt16)
    /// No key: any reachable primary can run it.
    case anyNode
    /// Refused before sending, with the error text the caller gets.
    case refused(String)
}

/// Key positions of the commands this client routes in cluster mode (the subset of Redis's
/// command table a gateway uses). A command not listed is refused rather than guessed: sent to
/// the wrong node it would either be redirected after a wasted round trip or, for commands
/// that act on one node only (`FLUSHALL`, `KEYS`), silently do a fraction of their job.
enum ClusterRouting {
    private enum KeySpec {
        case none
        /// One key at this index.
        case single(Int)
        /// Every argument from this index on is a key.
        case all(from: Int)
        /// Key, value, key, value… from index 1.
        case pairs
        /// `EVAL`-style: the key count at index 2, the keys after it.
        case counted
        /// `XREAD`-style: keys are the first half of what follows `STREAMS`.
        case streams
        /// Exactly these indices (`RENAME a b`).
        case indices([Int])
    }

    private static let table: [String: KeySpec] = {
        var table: [String: KeySpec] = [:]
        for name in ["PING", "ECHO", "INFO", "TIME", "PUBLISH", "SCRIPT", "FUNCTION", "CLUSTER", "CLIENT",
                     "CONFIG", "COMMAND", "ROLE", "WAIT", "LASTSAVE", "SLOWLOG", "LATENCY", "ACL", "MEMORY"] {
            table[name] = KeySpec.none
        }
        for name in ["GET", "SET", "SETNX", "SETEX", "PSETEX", "GETSET", "GETDEL", "GETEX", "APPEND", "STRLEN",
                     "GETRANGE", "SETRANGE", "INCR", "INCRBY", "INCRBYFLOAT", "DECR", "DECRBY", "EXPIRE",
                     "PEXPIRE", "EXPIREAT", "PEXPIREAT", "EXPIRETIME", "PEXPIRETIME", "TTL", "PTTL", "PERSIST",
                     "TYPE", "DUMP", "RESTORE", "HGET", "HSET", "HSETNX", "HMSET", "HMGET", "HDEL", "HGETALL",
                     "HINCRBY", "HINCRBYFLOAT", "HEXISTS", "HLEN", "HKEYS", "HVALS", "HSTRLEN", "SADD", "SREM",
                     "SMEMBERS", "SISMEMBER", "SMISMEMBER", "SCARD", "SPOP", "SRANDMEMBER", "LPUSH", "RPUSH",
                     "LPOP", "RPOP", "LRANGE", "LLEN", "LINDEX", "LSET", "LTRIM", "LREM", "ZADD", "ZREM",
                     "ZRANGE", "ZRANGEBYSCORE", "ZREVRANGE", "ZSCORE", "ZCARD", "ZINCRBY", "ZRANK", "ZCOUNT",
                     "ZREMRANGEBYSCORE", "XADD", "XRANGE", "XREVRANGE", "XLEN", "XTRIM", "XDEL", "XSETID",
                     "PFADD", "SETBIT", "GETBIT", "BITCOUNT"] {
            table[name] = .single(1)
        }
        for name in ["DEL", "UNLINK", "EXISTS", "MGET", "TOUCH", "PFCOUNT", "SINTER", "SUNION", "SDIFF",
                     "SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"] {
            table[name] = .all(from: 1)
        }
        for name in ["EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO", "FCALL", "FCALL_RO"] {
            table[name] = .counted
        }
        table["MSET"] = .pairs
        table["MSETNX"] = .pairs
        table["XREAD"] = .streams
        table["XREADGROUP"] = .streams
        table["RENAME"] = .indices([1, 2])
        table["RENAMENX"] = .indices([1, 2])
        table["SMOVE"] = .indices([1, 2])
        table["OBJECT"] = .single(2)
        table["XINFO"] = .single(2)
        return table
    }()

    static func route(_ arguments: RedisArguments) -> ClusterRoute {
        let name = arguments.name
        guard let spec = table[name] else {
            return .refused("ERR \(name) is not routed in cluster mode by this client")
        }
        let keys: [Int]
        switch spec {
        case .none: return .anyNode
        case .single(let index): keys = index < arguments.count ? [index] : []
        case .all(let from): keys = from < arguments.count ? Array(from..<arguments.count) : []
        case .pairs: keys = Array(stride(from: 1, to: arguments.count, by: 2))
        case .indices(let indices): keys = indices.filter { $0 < arguments.count }
        case .counted:
            guard arguments.count > 2, let count = Int(arguments.string(at: 2)), count >= 0,
                  3 + count <= arguments.count else { return .anyNode }
            keys = Array(3..<(3 + count))
        case .streams:
            guard let streams = (1..<arguments.count).first(where: { arguments.string(at: $0).uppercased() == "STREAMS" }) else {
                return .anyNode
            }
            let rest = arguments.count - streams - 1
            keys = rest > 0 && rest % 2 == 0 ? Array((streams + 1)...(streams + rest / 2)) : []
        }
        // Malformed arguments: let the server say what is wrong.
        guard let first = keys.first else { return .anyNode }
        let slot = HashSlot.slot(of: arguments.bytes(at: first))
        for index in keys.dropFirst() where HashSlot.slot(of: arguments.bytes(at: index)) != slot {
            return .refused("CROSSSLOT Keys in request don't hash to the same slot (\(name) refused by the client before sending)")
        }
        return .slot(slot)
    }
}
