import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// A minimal HTTP/1.1 client over SwiftNIO: one request per connection, text bodies, as the server expects.
struct HTTPClient: Sendable {
    /// Where the server listens, e.g. `http://127.0.0.1:8080`.
    var host: String
    /// The server's port.
    var port: Int

    /// A client for a server at `url` (`http://host:port`).
    init?(url: String) {
        guard let components = URLComponents(string: url), components.scheme == "http",
            let host = components.host, let port = components.port
        else { return nil }
        self.host = host
        self.port = port
    }

    /// Sends one request and returns the status and body of the answer; fails after 10 seconds without one.
    func send(_ method: HTTPMethod, _ path: String, body: String = "") async throws -> (HTTPResponseStatus, String) {
        let promise = MultiThreadedEventLoopGroup.singleton.next().makePromise(of: (HTTPResponseStatus, String).self)
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(ResponseCollector(promise: promise))
                }
            }
            .connectTimeout(.seconds(5))
            .connect(host: host, port: port).get()
        let deadline = channel.eventLoop.scheduleTask(in: .seconds(10)) {
            promise.fail(ExampleError("no answer from \(host):\(port) within 10 seconds"))
            channel.close(promise: nil)
        }
        defer { deadline.cancel() }
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: "\(host):\(port)")
        headers.add(name: "Content-Length", value: String(body.utf8.count))
        headers.add(name: "Connection", value: "close")
        channel.write(
            HTTPClientRequestPart.head(HTTPRequestHead(version: .http1_1, method: method, uri: path, headers: headers)),
            promise: nil)
        channel.write(HTTPClientRequestPart.body(.byteBuffer(ByteBuffer(string: body))), promise: nil)
        try await channel.writeAndFlush(HTTPClientRequestPart.end(nil))
        channel.closeFuture.whenComplete { _ in
            promise.fail(ChannelError.eof)
        }
        return try await promise.futureResult.get()
    }
}

/// Collects one response and completes `promise` with it.
private final class ResponseCollector: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart

    private let promise: EventLoopPromise<(HTTPResponseStatus, String)>
    private var status = HTTPResponseStatus.ok
    private var body = ByteBuffer()

    init(promise: EventLoopPromise<(HTTPResponseStatus, String)>) {
        self.promise = promise
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            status = head.status
        case .body(var chunk):
            body.writeBuffer(&chunk)
        case .end:
            promise.succeed((status, String(buffer: body)))
            context.close(promise: nil)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        promise.fail(error)
        context.close(promise: nil)
    }
}
