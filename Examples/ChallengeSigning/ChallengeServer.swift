import Crypto
import Foundation
import KeyAttestation
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// The server side: hands out random challenges and accepts a signature only from the key registered earlier.
///
/// It verifies with swift-crypto (`P256.Signing`, on BoringSSL), a code path independent of the enclave that signed
/// (OpenSSL 3), so a signature that passes here is a standard ECDSA P-256 / SHA-256 signature, not an agreement
/// between two halves of the same library.
///
/// With a `TPMAttestationVerifier` (`CHALLENGE_SIGNING_TPM_CA`), the server accepts only keys a TPM attests (our
/// KeyAttestation library, on OpenSSL): the client first shows its TPM's identity, gets a credential challenge, and
/// registers with the TPM's certification of its key.
///
/// Routes (bodies are hex strings, or JSON for attestation):
/// - `POST /register`: the client's 65-byte X9.63 public key → `201` (`403` when attestation is required).
/// - `POST /attestation/challenge`: a `TPMIdentity` → `200` and a `TPMAttestationChallenge`, valid once.
/// - `POST /register/attested`: the `TPMKeyAttestation` answering it → `201`, or `401` and why not.
/// - `GET /challenge`: → a fresh 32-byte challenge, valid once.
/// - `POST /verify`: `<challenge hex> <signature hex>` (DER) → `200 verified` or `401 rejected`.
///
/// The server serves at most `requestLimit` requests, then closes by itself.
final class ChallengeServer: Sendable {
    private let book: ChallengeBook
    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel

    /// Whether only TPM-attested keys register.
    let attests: Bool

    /// The address clients connect to (127.0.0.1 and the port the system picked).
    var baseURL: String { "http://127.0.0.1:\(channel.localAddress?.port ?? 0)" }

    /// Starts listening on 127.0.0.1 on an ephemeral port. With `attestation`, only TPM-attested keys register.
    init(requestLimit: Int, attestation: TPMAttestationVerifier? = nil) async throws {
        let book = ChallengeBook(requestLimit: requestLimit, attestation: attestation)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        self.book = book
        self.group = group
        attests = attestation != nil
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 16)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(RequestHandler(handle: book.respond(to:)))
                }
            }
        do {
            channel = try await bootstrap.bind(host: "127.0.0.1", port: 0).get()
        } catch {
            try await group.shutdownGracefully()
            throw error
        }
    }

    /// Stops listening and releases the event loop.
    func shutdown() async throws {
        try? await channel.close()
        try await group.shutdownGracefully()
    }
}

/// The server's state: the registered key, the challenges handed out and not yet answered, the requests left.
private final class ChallengeBook: Sendable {
    private struct State {
        /// The registered key in X9.63 form (the parsed key is not `Sendable`, so it is rebuilt per check).
        var registeredKey: Data?
        var outstandingChallenges: Set<Data> = []
        /// What the last attestation challenge expects; used up by the answer (right or wrong).
        var pendingAttestation: TPMAttestationExpectation?
        var requestsLeft: Int
    }

    private let state: Mutex<State>
    private let attestation: TPMAttestationVerifier?

    init(requestLimit: Int, attestation: TPMAttestationVerifier?) {
        state = Mutex(State(requestsLeft: requestLimit))
        self.attestation = attestation
    }

    /// Answers one request; the last one allowed also closes the server.
    func respond(to request: HTTPRequest) -> HTTPResponse {
        let (allowed, limitReached) = state.withLock { state -> (Bool, Bool) in
            guard state.requestsLeft > 0 else { return (false, true) }
            state.requestsLeft -= 1
            return (true, state.requestsLeft == 0)
        }
        guard allowed else { return HTTPResponse(status: .serviceUnavailable, body: "request limit reached") }
        var response = route(request)
        response.closesServer = limitReached
        return response
    }

    private func route(_ request: HTTPRequest) -> HTTPResponse {
        switch (request.method, request.path) {
        case (.POST, "/register") where attestation != nil:
            return HTTPResponse(status: .forbidden, body: "rejected: this server registers TPM-attested keys only")

        case (.POST, "/attestation/challenge"):
            guard let attestation else {
                return HTTPResponse(status: .notFound, body: "this server does not attest keys")
            }
            guard let identity = try? JSONDecoder().decode(TPMIdentity.self, from: Data(request.body.utf8)) else {
                return HTTPResponse(status: .badRequest, body: "expected a TPMIdentity in JSON")
            }
            do {
                let (challenge, expectation) = try attestation.challenge(for: identity)
                state.withLock { $0.pendingAttestation = expectation }
                return HTTPResponse(
                    status: .ok, body: String(decoding: try JSONEncoder().encode(challenge), as: UTF8.self))
            } catch {
                return HTTPResponse(status: .forbidden, body: "rejected: \(error)")
            }

        case (.POST, "/register/attested"):
            guard let attestation else {
                return HTTPResponse(status: .notFound, body: "this server does not attest keys")
            }
            guard let answer = try? JSONDecoder().decode(TPMKeyAttestation.self, from: Data(request.body.utf8)) else {
                return HTTPResponse(status: .badRequest, body: "expected a TPMKeyAttestation in JSON")
            }
            // Taken out before checking: a challenge is answered once, right or wrong.
            let pending = state.withLock { state in
                defer { state.pendingAttestation = nil }
                return state.pendingAttestation
            }
            guard let expectation = pending else {
                return HTTPResponse(status: .unauthorized, body: "rejected: no attestation challenge is open")
            }
            do {
                let key = try attestation.verify(answer, expecting: expectation)
                state.withLock { $0.registeredKey = key.publicKey }
                return HTTPResponse(status: .created, body: "registered a TPM-attested key")
            } catch {
                return HTTPResponse(status: .unauthorized, body: "rejected: \(error)")
            }

        case (.POST, "/register"):
            guard let bytes = Data(hex: request.body), (try? P256.Signing.PublicKey(x963Representation: bytes)) != nil
            else { return HTTPResponse(status: .badRequest, body: "not a P-256 public key in X9.63 form") }
            state.withLock { $0.registeredKey = bytes }
            return HTTPResponse(status: .created, body: "registered")

        case (.GET, "/challenge"):
            var generator = SystemRandomNumberGenerator()
            let challenge = Data((0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) })
            state.withLock { _ = $0.outstandingChallenges.insert(challenge) }
            return HTTPResponse(status: .ok, body: challenge.hexString)

        case (.POST, "/verify"):
            let parts = request.body.split(separator: " ").map(String.init)
            guard parts.count == 2, let challenge = Data(hex: parts[0]), let signatureBytes = Data(hex: parts[1])
            else { return HTTPResponse(status: .badRequest, body: "expected <challenge hex> <signature hex>") }
            let (key, wasIssued) = state.withLock { state in
                (state.registeredKey, state.outstandingChallenges.remove(challenge) != nil)
            }
            guard let key, let publicKey = try? P256.Signing.PublicKey(x963Representation: key) else {
                return HTTPResponse(status: .conflict, body: "no key registered")
            }
            guard wasIssued else {
                return HTTPResponse(status: .unauthorized, body: "rejected: unknown or reused challenge")
            }
            // An ECDSA P-256 signature over SHA-256 of the challenge, DER-encoded (X9.62), checked by BoringSSL.
            guard let signature = try? P256.Signing.ECDSASignature(derRepresentation: signatureBytes),
                publicKey.isValidSignature(signature, for: challenge)
            else { return HTTPResponse(status: .unauthorized, body: "rejected: bad signature") }
            return HTTPResponse(status: .ok, body: "verified")

        default:
            return HTTPResponse(status: .notFound, body: "no route for \(request.method) \(request.path)")
        }
    }
}

/// One request as the server's handler saw it.
struct HTTPRequest: Sendable {
    var method: HTTPMethod
    var path: String
    var body: String
}

/// One response: a status and a short text body.
struct HTTPResponse: Sendable {
    var status: HTTPResponseStatus
    var body: String
    /// Whether the server closes its listening socket after sending this response.
    var closesServer = false
}

/// Collects a request's head and body, answers it with `handle`, and closes the connection.
private final class RequestHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let handle: @Sendable (HTTPRequest) -> HTTPResponse
    private var head: HTTPRequestHead?
    private var body = ByteBuffer()

    init(handle: @escaping @Sendable (HTTPRequest) -> HTTPResponse) {
        self.handle = handle
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body.clear()
        case .body(var chunk):
            guard body.readableBytes + chunk.readableBytes <= 8192 else {
                context.close(promise: nil)
                return
            }
            body.writeBuffer(&chunk)
        case .end:
            guard let head else { return }
            let response = handle(
                HTTPRequest(method: head.method, path: head.uri, body: String(buffer: body)))
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "text/plain; charset=utf-8")
            headers.add(name: "Content-Length", value: String(response.body.utf8.count))
            headers.add(name: "Connection", value: "close")
            context.write(
                wrapOutboundOut(
                    .head(HTTPResponseHead(version: head.version, status: response.status, headers: headers))),
                promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: response.body)))), promise: nil)
            let parent = context.channel.parent
            let closesServer = response.closesServer
            context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in
                context.close(promise: nil)
                if closesServer { parent?.close(promise: nil) }
            }
        }
    }
}

extension Data {
    /// Lower-case hexadecimal.
    var hexString: String { map { String(format: "%02x", $0) }.joined() }

    /// The bytes of a hexadecimal string; nil if it is not one.
    init?(hex: String) {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes = [UInt8]()
        bytes.reserveCapacity(digits.count / 2)
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let byte = UInt8(String(decoding: digits[index...index + 1], as: UTF8.self), radix: 16) else {
                return nil
            }
            bytes.append(byte)
        }
        self.init(bytes)
    }
}
