import AGPolicy
import AGRedis

/// The `api` bucket without a Redis round trip per proxied request: each worker leases a batch
/// of tokens from the tenant's bucket (`RateLimitScript.lease`, sized by `LeaseSizing`) and
/// spends them locally until they run out or lapse. Requests arriving while a lease is being
/// fetched wait for it, so a worker has at most one lease call per bucket in flight.
///
/// Leased tokens are taken from the shared bucket first, so leasing never admits more than the
/// bucket holds; `X-RateLimit-Remaining` reads Redis's count at the last lease plus this
/// worker's unspent tokens. Each lease call also reads the tenant's device epoch (see
/// `RateLimiter+Devices`).
extension RateLimiter {
    /// One bucket's lease on this worker. A class, so spending a token is one dictionary
    /// lookup with no write back (this runs per proxied request).
    final class Lease {
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

    /// Admits one request against `check` from the worker's lease of it, fetching a new one
    /// (with the tenant's device epoch at `epochKey`) when it is spent or lapsed. Completes
    /// exactly once on the loop thread.
    public func lease(_ check: BucketCheck, epochKey: String, fallback: RateLimitFallback,
                      completion: @escaping (RateLimitOutcome) -> Void) {
        if let outcome = spendLeased(check) { return completion(outcome) }
        let lease = leases[check.key].flatMap { $0.check == check ? $0 : nil } ?? Lease(check: check)
        lease.demand += 1
        lease.tokens = 0
        lease.waiting.append(completion)
        let start = !lease.requesting
        lease.requesting = true
        leases[check.key] = lease
        if start { fetchLease(check, epochKey: epochKey, fallback: fallback) }
    }

    /// One token from the lease of `check` when it holds one and has not lapsed; nil otherwise.
    func spendLeased(_ check: BucketCheck) -> RateLimitOutcome? {
        guard let lease = leases[check.key], lease.check == check, lease.tokens > 0, time.nowMicroseconds < lease.expiresAt,
              let decision = lease.decision else { return nil }
        lease.demand += 1
        lease.tokens -= 1
        return .allowed(BucketDecision(check: check, decision: Self.local(decision, unspent: lease.tokens)))
    }

    private func fetchLease(_ check: BucketCheck, epochKey: String, fallback: RateLimitFallback) {
        guard let lease = leases[check.key] else { return }
        let want = max(lease.waiting.count, LeaseSizing.batch(limitPerMinute: check.limitPerMinute,
                                                              remaining: lease.decision?.remaining ?? Int.max,
                                                              demand: lease.demand + lease.lastGranted))
        lease.demand = 0
        let now = time.nowMicroseconds
        redis.evalScript(RateLimitScript.lease, keys: [check.key, epochKey],
                         args: [String(now), String(check.limitPerMinute), String(want), DeviceEpoch.seed()]) { [self] result in
            guard let lease = leases[check.key] else { return }
            var answers: [(completion: (RateLimitOutcome) -> Void, outcome: RateLimitOutcome)] = []
            var stillWaiting: [(RateLimitOutcome) -> Void] = []
            if case .success(let reply) = result,
               let (granted, decision, epoch) = RateLimitScript.leaseDecision(from: reply, limit: check.limitPerMinute) {
                leaveFallback()
                learnEpoch(epochKey, epoch, sentAt: now)
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
            if lease.requesting { fetchLease(check, epochKey: epochKey, fallback: fallback) }
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
