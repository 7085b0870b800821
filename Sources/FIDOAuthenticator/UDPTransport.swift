import FIDOProtocol
import Foundation
import NIOCore
import NIOPosix

/// CTAPHID over UDP (`lactl fido serve --udp HOST:PORT`): each datagram is one 64-byte report, and the answers go
/// to the address that sent it. Test tools use this transport (python-fido2's devices take any packet connection);
/// it needs no kernel device. Datagrams of another size are dropped.
public final class FIDOUDPTransport: Sendable {
    private let channel: any Channel
    private let group: MultiThreadedEventLoopGroup
    private let server: CTAPHIDServer<SocketAddress>
    private let sweeper: Task<Void, Never>

    /// Listens on `host`:`port` (port 0: any free one, see ``port``) for `authenticator`.
    public init(host: String, port: Int, authenticator: FIDOAuthenticator) async throws {
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let outbound = OutboundReports()
        let server = CTAPHIDServer<SocketAddress>(authenticator: authenticator) { report, peer in
            outbound.send(report, to: peer)
        }
        self.server = server
        channel = try await DatagramBootstrap(group: group)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ReportHandler(server: server))
                }
            }
            .bind(host: host, port: port).get()
        outbound.channel = channel
        // A message whose packets stopped coming is answered ERR_MSG_TIMEOUT even when nothing else arrives.
        sweeper = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(250))
                await server.expireStaleMessage()
            }
        }
    }

    /// The port it listens on.
    public var port: Int { channel.localAddress?.port ?? 0 }

    /// Stops listening.
    public func close() async throws {
        sweeper.cancel()
        try await channel.close()
        try await group.shutdownGracefully()
    }

    /// Runs until the channel closes.
    public func run() async throws {
        defer { sweeper.cancel() }
        try await channel.closeFuture.get()
    }
}

/// Where the server's reports go out: the channel, once bound.
private final class OutboundReports: @unchecked Sendable {
    // Safe to share: `channel` is set once, before the first datagram can arrive, and only read afterwards.
    var channel: (any Channel)?

    func send(_ report: [UInt8], to peer: SocketAddress) {
        guard let channel else { return }
        let buffer = channel.allocator.buffer(bytes: report)
        channel.writeAndFlush(AddressedEnvelope(remoteAddress: peer, data: buffer), promise: nil)
    }
}

/// Hands each 64-byte datagram to the server, in order.
private final class ReportHandler: ChannelInboundHandler, Sendable {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>

    private let server: CTAPHIDServer<SocketAddress>
    private let queue: AsyncStream<(report: [UInt8], peer: SocketAddress)>.Continuation
    private let consumer: Task<Void, Never>

    init(server: CTAPHIDServer<SocketAddress>) {
        self.server = server
        // Bounded: a flood of datagrams drops the oldest rather than growing without end.
        let (stream, continuation) = AsyncStream<(report: [UInt8], peer: SocketAddress)>.makeStream(
            bufferingPolicy: .bufferingNewest(256))
        queue = continuation
        consumer = Task {
            for await (report, peer) in stream { await server.receive(report, from: peer) }
        }
    }

    deinit {
        queue.finish()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var envelope = unwrapInboundIn(data)
        guard envelope.data.readableBytes == CTAPHID.reportSize,
            let report = envelope.data.readBytes(length: CTAPHID.reportSize)
        else { return }
        queue.yield((report, envelope.remoteAddress))
    }
}
