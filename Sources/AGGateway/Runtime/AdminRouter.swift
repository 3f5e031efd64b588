import AGHTTP

/// Dispatches admin-listener requests. Every call needs `Authorization: Bearer <admin token>`.
struct AdminRouter {
    unowned let worker: Worker

    func handle(_ request: HTTPServerRequest) {
        let context = RequestContext(request: request, snapshot: worker.shared.snapshots.snapshot, worker: worker)
        context.route = "admin"
        guard authorized(context) else {
            var error = GatewayError.unauthorized
            error.headers = [("WWW-Authenticate", "Bearer")]
            context.fail(error)
            return
        }
        let path = request.path
        switch (request.method, path) {
        case ("GET", "/metrics"):
            context.route = "metrics"
            context.respond(status: 200, body: Array(worker.shared.metrics.render().utf8),
                            contentType: "text/plain; version=0.0.4")
        case ("POST", "/admin/v1/reload"):
            context.route = "admin_reload"
            reload(context)
        default:
            context.fail(.notFound)
        }
    }

    private func authorized(_ context: RequestContext) -> Bool {
        guard let expected = context.snapshot.adminToken,
              let header = context.request.headers["Authorization"], header.hasPrefix("Bearer ") else {
            return false
        }
        return constantTimeEquals(Array(header.utf8.dropFirst(7)), Array(expected.utf8))
    }

    /// Reloads off the event loop (on the control thread), then answers on this loop.
    private func reload(_ context: RequestContext) {
        let loop = worker.loop
        let shared = worker.shared
        let box = UncheckedBox(context)
        shared.control.execute {
            let outcome = shared.reload(trigger: "admin")
            loop.execute {
                let context = box.value
                switch outcome {
                case .success(let generation):
                    context.respond(status: 200, json: "{\"status\":\"reloaded\",\"generation\":\(generation)}")
                case .failure(let error):
                    var gatewayError = GatewayError(status: 400, code: "config_invalid",
                                                    message: "configuration rejected; the previous one stays in force")
                    gatewayError.hint = error.lines.joined(separator: "\n")
                    context.fail(gatewayError)
                }
            }
        }
    }
}

/// Carries a loop-bound object through another thread and back, untouched in between.
struct UncheckedBox<Value>: @unchecked Sendable {
    // Invariant: `value` is only dereferenced on the thread that created the box.
    let value: Value
    init(_ value: Value) { self.value = value }
}

/// Compares secrets without an early exit on the first differing byte.
func constantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    var difference: UInt8 = 0
    for index in a.indices { difference |= a[index] ^ b[index] }
    return difference == 0
}
