internal import CEvent

/// Request bodies: moving decoded bytes to the handler's consumer, `100 Continue`, and the
/// minimum body rate.
extension HTTPServerConnection {
    /// Moves available body bytes to the request's consumer.
    func pumpBody() {
        guard let request = current, !request.bodyPaused else { return }
        // Also for an empty body (`Content-Length: 0`), as nginx does: RFC 9110 section 10.1.1
        // lets a server omit it then, but Java 17's HttpClient waits for it forever.
        if request.expectContinuePending {
            request.expectContinuePending = false
            if !request.responseStarted {
                evbuffer_add(output, Self.continueLine, Self.continueLine.count)
                flushOutput()
            }
        }
        switch request.bodyConsumer {
        case .none, .done:
            return
        case .collect(let limit, let buffer, let completion):
            startBodyWindow(request)
            let result = request.decoder.decode(from: input, into: buffer, budget: limit + 1 - request.decoder.bytesDecoded)
            if request.decoder.bytesDecoded > limit {
                bodyBroken(request, .tooLarge)
                return
            }
            switch result {
            case .needMore:
                return
            case .malformed(let why):
                bodyBroken(request, .malformed(why))
            case .done:
                request.bodyConsumer = .done
                bodyComplete()
                let length = evbuffer_get_length(buffer)
                var body = [UInt8](repeating: 0, count: length)
                if length > 0 { body.withUnsafeMutableBytes { _ = evbuffer_remove(buffer, $0.baseAddress, length) } }
                evbuffer_free(buffer)
                completion(.success(body))
            }
        case .stream(let onData, let onEnd):
            startBodyWindow(request)
            let chunk = evbuffer_new()!
            defer { evbuffer_free(chunk) }
            let result = request.decoder.decode(from: input, into: chunk)
            if evbuffer_get_length(chunk) > 0 { onData(chunk) }
            switch result {
            case .needMore:
                return
            case .malformed(let why):
                bodyBroken(request, .malformed(why))
            case .done:
                request.bodyConsumer = .done
                bodyComplete()
                onEnd(.success(()))
            }
        }
    }

    private static let continueLine = Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)

    private func bodyComplete() {
        cancelDeadline()
        setTimeouts(read: .off)
    }

    private func bodyBroken(_ request: HTTPServerRequest, _ error: HTTPBodyError) {
        cancelDeadline()
        request.keepAlive = false
        request.fail(body: error)
    }

    // MARK: Minimum body rate

    /// Body bytes the client has delivered: decoded, or waiting in the input buffer.
    private func bodyBytesReceived(_ request: HTTPServerRequest) -> Int {
        request.decoder.bytesDecoded + evbuffer_get_length(input)
    }

    /// Starts measuring once a handler reads the body: before that, a slow body is the
    /// handler's choice (it may be waiting for Redis), not the client's. The first window
    /// credits every body byte delivered since the head, those that came in the head's own
    /// packets included: whether an upload passes must not depend on how its packets split.
    private func startBodyWindow(_ request: HTTPServerRequest) {
        guard configuration.bodyMinRate > 0, bodyWindowStart == nil, !request.decoder.isDone else { return }
        bodyWindowStart = 0
        armDeadline(after: configuration.bodyRateWindow)
    }

    /// Each window must bring `bodyMinRate × window` bytes, unless the gateway itself held the
    /// body back (upstream backpressure, full input buffer): then the window starts over.
    func bodyRateWindowEnded() {
        guard let request = current, let start = bodyWindowStart, !request.decoder.isDone else { return }
        let received = bodyBytesReceived(request)
        let heldBack = request.bodyPaused || evbuffer_get_length(input) >= configuration.readHighWatermark
        let window = configuration.bodyRateWindow
        let (seconds, attoseconds) = window.components
        let required = Double(configuration.bodyMinRate) * (Double(seconds) + Double(attoseconds) / 1e18)
        if !heldBack, Double(received - start) < required {
            close()
            return
        }
        bodyWindowStart = received
        armDeadline(after: window)
    }
}
