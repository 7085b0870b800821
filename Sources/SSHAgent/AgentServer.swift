import Foundation
import NIOCore
import NIOPosix
import SSHAgentProtocol
import SocketPeer

/// The agent on a Unix socket (SwiftNIO): each message is a uint32 length and a body of at most 256 KiB (OpenSSH's
/// own limit); requests of one connection are answered in order; a length over the limit closes that connection and
/// no other. Each connection's peer is read from the kernel (`SO_PEERCRED`) when it connects; a program of another
/// user is disconnected at once, whatever the socket's permissions.
public final class AgentServer: Sendable {
    /// OpenSSH's `AGENT_MAX_LEN`.
    static let maximumMessageByteCount = 256 * 1024

    private let channel: any Channel
    private let group: MultiThreadedEventLoopGroup

    /// Listens on `path` (created 0600 after a stale socket there is removed) for `agent`.
    public init(path: String, agent: Agent) async throws {
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        unlink(path)
        let previous = umask(0o177)
        defer { umask(previous) }
        channel = try await ServerBootstrap(group: group)
            .childChannelInitializer { channel in
                Self.peer(of: channel).flatMapThrowing { peer, process in
                    guard peer.uid == getuid() else { throw AgentServerError.otherUser(peer.uid) }
                    try channel.pipeline.syncOperations.addHandler(
                        ByteToMessageHandler(AgentFrameDecoder(limit: Self.maximumMessageByteCount)))
                    try channel.pipeline.syncOperations.addHandler(
                        AgentConnectionHandler(agent: agent, session: Agent.Session(peer: peer, process: process)))
                }
            }
            .bind(unixDomainSocketPath: path, cleanupExistingSocketFile: true).get()
    }

    /// Stops listening and closes the connections.
    public func close() async throws {
        try await channel.close()
        try await group.shutdownGracefully()
    }

    /// The connected program's credentials (`SO_PEERCRED`) and executable, and the process held by its pidfd (nil
    /// when it is gone).
    static func peer(of channel: any Channel) -> EventLoopFuture<(AgentPeer, PeerProcess?)> {
        channel.peerCredentials().and(channel.peerPidfd()).map { credentials, pidfd in
            let process = try? PeerProcess(credentials: credentials, pidfd: pidfd)
            return (AgentPeer(pid: credentials.pid, uid: credentials.uid), process)
        }
    }

    /// Runs until the listening channel closes.
    public func run() async throws {
        try await channel.closeFuture.get()
    }
}

enum AgentServerError: Error {
    /// The peer runs as another user.
    case otherUser(uid_t)
}

/// Cuts the stream into message bodies; a declared length over the limit ends the connection.
struct AgentFrameDecoder: ByteToMessageDecoder {
    typealias InboundOut = [UInt8]
    let limit: Int

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard let length = buffer.getInteger(at: buffer.readerIndex, as: UInt32.self) else { return .needMoreData }
        guard length <= limit else { throw AgentProtocolError.truncated }
        guard buffer.readableBytes >= 4 + Int(length) else { return .needMoreData }
        buffer.moveReaderIndex(forwardBy: 4)
        context.fireChannelRead(wrapInboundOut(buffer.readBytes(length: Int(length))!))
        return .continue
    }
}

/// Answers the bodies of one connection in order, each after the previous one's answer is written.
final class AgentConnectionHandler: ChannelInboundHandler, @unchecked Sendable {
    // Safe to share: `queue` is only touched on the channel's event loop.
    typealias InboundIn = [UInt8]
    typealias OutboundOut = ByteBuffer

    private let agent: Agent
    private let session: Agent.Session
    private var queue: [[UInt8]] = []
    private var busy = false

    init(agent: Agent, session: Agent.Session) {
        self.agent = agent
        self.session = session
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        queue.append(unwrapInboundIn(data))
        next(context)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    private func next(_ context: ChannelHandlerContext) {
        guard !busy, !queue.isEmpty else { return }
        busy = true
        let body = queue.removeFirst()
        let agent = self.agent
        let session = self.session
        let loop = context.eventLoop
        let bound = NIOLoopBound(context, eventLoop: loop)
        Task {
            let answer = await agent.respond(to: body, in: session)
            loop.execute {
                let context = bound.value
                var buffer = context.channel.allocator.buffer(capacity: answer.count + 4)
                buffer.writeInteger(UInt32(answer.count))
                buffer.writeBytes(answer)
                context.writeAndFlush(self.wrapOutboundOut(buffer), promise: nil)
                self.busy = false
                self.next(context)
            }
        }
    }
}
