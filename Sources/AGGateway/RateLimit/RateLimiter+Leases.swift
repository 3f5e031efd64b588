import AGPolicy
import AGRedis

/// The `api` bucket without a Redis round trip per proxied request: each worker leases a batch
/// of tokens from the tenant's bucket (`RateLimitScript.lease`, sized by `LeaseSizing`) and
/// spends them locally until they run out or lapse. Requests arriving while a lease is being
/// fetched wait for it, so a worker has at most one lease call per bucket in flight.
///
/// Leased tokens are taken from the shared bucket first, so leasing never admits more than the
/// bucket holds; `X-RateLimit-Remaining` reads Redis's count at the last lease plus this
/// worker's unspent tokens.
extension RateLimiter {
    /// One bucket's lease on this worker.
    struct Lease {
        let check: BucketCheck
        /// Tokens this worker may still spend.
        var tokens = 0
        /// Unix µs after which unspent tokens lapse.
        var expiresAt: Int64 = 0
        /// Redis's decision at the last lease (its `remaining` excludes `tokens`).
        var decision: TokenBucket.Decision?
        /// Requests seen since the last lease was asked for.
        var demand = 0
        /// Tokens the last lease granted: with `demand`, what the next one is sized for, so a
        /// busy bucket's leases grow (up to `LeaseSizing`'s caps) instead of staying at one.
        var lastGranted = 0
        var requesting = false
        var waiting: [(RateLimitOutcome) -> Void] = []

        init(check: BucketCheck) {
            self.check = check
        }
    }

    /// Admits one request against `check` from the worker's lease, fetching a new one when
    /// it is spent or lapsed. Completes exactly once on the loop thread.
    public func lease(_ check: BucketCheck, fallback: RateLimitFallback, completion: @escaping (RateLimitOutcome) -> Void) {
        let now = time.nowMicroseconds
        var lease = leases[check.key].flatMap { $0.check == check ? $0 : nil } ?? Lease(check: check)
        lease.demand += 1
        if lease.tokens > 0, now < lease.expiresAt, let decision = lease.decision {
            lease.tokens -= 1
            leases[check.key] = lease
            completion(.allowed(BucketDecision(check: check, decision: Self.local(decision, unspent: lease.tokens))))
            return
        }
        lease.tokens = 0
        lease.waiting.append(completion)
        let start = !lease.requesting
        lease.requesting = true
        leases[check.key] = lease
        if start { fetchLease(check, fallback: fallback) }
    }

    private func fetchLease(_ check: BucketCheck, fallback: RateLimitFallback) {
        guard var lease = leases[check.key] else { return }
        let want = max(lease.waiting.count, LeaseSizing.batch(limitPerMinute: check.limitPerMinute,
                                                              remaining: lease.decision?.remaining ?? Int.max,
                                                              demand: lease.demand + lease.lastGranted))
        lease.demand = 0
        leases[check.key] = lease
        let now = time.nowMicroseconds
        redis.evalScript(RateLimitScript.lease, keys: [check.key],
                         args: [String(now), String(check.limitPerMinute), String(want)]) { [self] result in
            guard var lease = leases[check.key] else { return }
            var answers: [(completion: (RateLimitOutcome) -> Void, outcome: RateLimitOutcome)] = []
            var stillWaiting: [(RateLimitOutcome) -> Void] = []
            if case .success(let reply) = result,
               let (granted, decision) = RateLimitScript.leaseDecision(from: reply, limit: check.limitPerMinute) {
                leaveFallback()
                // Fewer than asked for: the shared bucket ran dry, the rest are refused. As many as
                // asked for while more requests queued up meanwhile: those wait for the next lease.
                let exhausted = granted < want
                var unspent = granted
                for completion in lease.waiting {
                    if unspent > 0 {
                        unspent -= 1
                        answers.append((completion, .allowed(BucketDecision(check: check, decision: Self.local(decision, unspent: unspent)))))
                    } else if exhausted {
                        let refused = TokenBucket.Decision(allowed: false, limit: decision.limit, remaining: 0,
                                                           resetAt: decision.resetAt, retryAfter: max(1, decision.retryAfter))
                        answers.append((completion, .limited(BucketDecision(check: check, decision: refused))))
                    } else {
                        stillWaiting.append(completion)
                    }
                }
                lease.tokens = unspent
                lease.lastGranted = granted
                lease.expiresAt = now + LeaseSizing.lifetimeMicroseconds
                lease.decision = decision
            } else {
                let reason = if case .failure(let error) = result { error.description } else { "unexpected lease reply" }
                enterFallback(reason: reason)
                answers = lease.waiting.map { ($0, fallbackOutcome([check], fallback)) }
                lease.decision = nil
                lease.lastGranted = 0
            }
            lease.waiting = stillWaiting
            lease.requesting = !stillWaiting.isEmpty
            leases[check.key] = lease
            if lease.requesting { fetchLease(check, fallback: fallback) }
            // Completions may send more requests through `lease`: the state is stored first.
            for answer in answers { answer.completion(answer.outcome) }
        }
    }

    /// Redis's decision seen from this worker, with `unspent` leased tokens still to come.
    private static func local(_ decision: TokenBucket.Decision, unspent: Int) -> TokenBucket.Decision {
        TokenBucket.Decision(allowed: true, limit: decision.limit, remaining: decision.remaining + unspent,
                             resetAt: decision.resetAt, retryAfter: 0)
    }
}
