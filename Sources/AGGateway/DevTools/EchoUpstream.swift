import AGConfig
import AGEventLoop
import AGHTTP

/// A tiny upstream for the quick start and demos: answers every request with the method, target
/// and headers it received as JSON, so one can see exactly what the gateway forwards.
public enum EchoUpstream {
    /// Serves on `host:port` until the process ends.
    public static func serve(host: String, port: Int) throws -> Never {
        let socket = try ListeningSocket.bind(host: host, port: port)
        let loop = EventLoop()
        let server = HTTPServer(loop: loop, socket: socket, configuration: HTTPServerConfiguration()) { request in
            request.collectBody(limit: 1 << 20) { body in
                var headers = "["
                for (index, field) in request.headers.fields.enumerated() {
                    if index > 0 { headers += "," }
                    var pair = JSONObjectWriter()
                    pair.add("name", field.name)
                    pair.add("value", field.value)
                    headers += pair.finished()
                }
                headers += "]"
                var json = JSONObjectWriter()
                json.add("method", request.method)
                json.add("target", request.head.target)
                json.add("headers", rawJSON: headers)
                json.add("bodyBytes", (try? body.get().count) ?? 0)
                var responseHeaders = HTTPHeaders()
                responseHeaders.add("Content-Type", "application/json")
                request.respond(status: 200, headers: responseHeaders, body: Array((json.finished() + "\n").utf8))
            }
        }
        print("echo upstream listening on \(host):\(socket.port)")
        withExtendedLifetime(server) { loop.run() }
        fatalError("event loop stopped")
    }
}
