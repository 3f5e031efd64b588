import AGEventLoop
import AGFormats
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
                let headers = request.headers.fields.map { field -> JSONValue in
                    .object(["name": .string(field.name), "value": .string(field.value)])
                }
                let json = JSONValue.object([
                    "method": .string(request.method), "target": .string(String(request.head.target)),
                    "headers": .array(headers), "bodyBytes": .integer(Int64((try? body.get().count) ?? 0)),
                ])
                var responseHeaders = HTTPHeaders()
                responseHeaders.add("Content-Type", "application/json")
                request.respond(status: 200, headers: responseHeaders, body: json.serialized() + [0x0A])
            }
        }
        print("echo upstream listening on \(host):\(socket.port)")
        withExtendedLifetime(server) { loop.run() }
        fatalError("event loop stopped")
    }
}
