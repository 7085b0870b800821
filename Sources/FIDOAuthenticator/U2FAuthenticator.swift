import FIDOProtocol
import Foundation
import LocalAuthentication
import SecureCrypto

/// A U2F request that waits for the user (a registration, a signature), answered as U2F clients expect: the first
/// request starts the finger prompt and is told "conditions not satisfied" (0x6985), and the client asks again,
/// every few hundred milliseconds, until the finger was given and the answer is ready (U2F's test of user
/// presence, which a security key's button latches).
struct U2FPresence {
    /// The request this presence is for (INS, P1 and data): only the same request collects the answer.
    let request: [UInt8]
    /// The requests that wait with it rather than drop it: for a signature, the same application and challenge
    /// with another key handle (clients try each handle they hold in turn while they poll).
    let group: [UInt8]
    let session: UInt64
    /// Which request this is, so a late answer of an abandoned one is recognized.
    let number: UInt64
    let task: Task<Void, Never>
    /// The answer once ready (response data), or what failed; and the credential a registration made.
    var answer: Result<[UInt8], any Error>?
    var madeCredential: String?
    /// When the client last asked: a presence not asked for in ``FIDOAuthenticator/u2fPatience`` is abandoned.
    var lastAsked: ContinuousClock.Instant
}

extension FIDOAuthenticator {
    /// How long a U2F answer waits for its client to ask again before it is dropped (a registration's credential
    /// with it).
    static let u2fPatience = Duration.seconds(10)

    /// Answers one `CTAPHID_MSG` request, a U2F command APDU (FIDO U2F Raw Message Formats; CTAP 2.1 §11.2.9.1.1):
    /// `VERSION` ("U2F_V2"), `REGISTER` (a new server-side credential, a persisted right like every other, with a
    /// self-signed attestation of a one-time key, ``AttestationCertificate``) and `AUTHENTICATE` (check-only, or a
    /// signature after the finger; a CTAP2 credential answers for its RP ID's hash, unless `credProtect` level 3
    /// keeps it from requests without user verification, which U2F never gives). The answer is the response data,
    /// then the status word.
    public func respondU2F(to request: [UInt8], session: UInt64 = 0) async -> [UInt8] {
        pendingAssertions = nil
        managementEnumeration = nil
        await dropStaleU2FPresence()
        do {
            let command = try U2F.Command(request)
            guard command.cla == 0 else { throw U2F.StatusWord.classNotSupported }
            let data: [UInt8]
            switch U2F.Instruction(rawValue: command.ins) {
            case .version:
                guard command.data.isEmpty else { throw U2F.StatusWord.wrongLength }
                data = Array("U2F_V2".utf8)
            case .register: data = try await u2fRegister(command, session: session)
            case .authenticate: data = try await u2fAuthenticate(command, session: session)
            case nil: throw U2F.StatusWord.instructionNotSupported
            }
            return data + U2F.StatusWord.noError.bytes
        } catch let status as U2F.StatusWord {
            return status.bytes
        } catch {
            return U2F.StatusWord.unknown.bytes
        }
    }

    /// `REGISTER`: the challenge's and the application's SHA-256, 32 bytes each.
    private func u2fRegister(_ command: U2F.Command, session: UInt64) async throws -> [UInt8] {
        guard command.data.count == 64 else { throw U2F.StatusWord.wrongLength }
        let challenge = Array(command.data[0..<32])
        let application = Array(command.data[32..<64])
        if Self.isDummyRegistration(challenge: challenge, application: application) {
            // A client collecting a touch (no key handle of its list is here, or one is excluded): a key made for
            // the answer and dropped, so nothing is kept.
            return try await withU2FPresence(command, session: session) {
                try await self.askPresence("A site asks you to touch this security key")
                let key = try P256.PrivateKey()
                let handle = Array(try SecureRandom.bytes(16))
                return (
                    try Self.registration(challenge, application, handle, Array(key.publicKey.x963Representation)), nil
                )
            }
        }
        let credentials = self.credentials
        let approve = self.approve
        return try await withU2FPresence(command, session: session) {
            let template = FIDOCredential(
                id: (0..<16).map { _ in UInt8.random(in: .min ... .max) },
                relyingParty: "u2f:" + application.map { String(format: "%02x", $0) }.joined(),
                relyingPartyName: nil, userID: [], userName: nil, userDisplayName: nil, discoverable: false,
                madeWithUserVerification: false, signatureCount: 0, created: Date(), applicationParameter: application)
            let (credential, publicKey) = try await credentials.create(template) { right in
                try await approve(right, "A site wants to register this security key (U2F, which sends no site name)")
            }
            do {
                return (try Self.registration(challenge, application, credential.id, publicKey), credential.hexID)
            } catch {
                try? await credentials.delete(hexID: credential.hexID)
                throw error
            }
        }
    }

    /// U2F's register answer for a key handle and public key, attested by a one-time key.
    private static func registration(
        _ challenge: [UInt8], _ application: [UInt8], _ handle: [UInt8], _ publicKey: [UInt8]
    ) throws -> [UInt8] {
        let attestation = try AttestationCertificate()
        let signed: [UInt8] = [0x00] + application + challenge + handle + publicKey
        let signature = Array(try attestation.key.signature(for: signed).derRepresentation)
        return [0x05] + publicKey + [UInt8(handle.count)] + handle + attestation.der + signature
    }

    /// Whether a registration only collects a touch: Chrome's 0x41 application and 0x42 challenge; libfido2,
    /// python-fido2 and authenticator-rs send the same 32 bytes as both.
    static func isDummyRegistration(challenge: [UInt8], application: [UInt8]) -> Bool {
        application == challenge || (application.allSatisfy { $0 == 0x41 } && challenge.allSatisfy { $0 == 0x42 })
    }

    /// `AUTHENTICATE`: the challenge's and the application's SHA-256, the key handle's length and the key handle.
    private func u2fAuthenticate(_ command: U2F.Command, session: UInt64) async throws -> [UInt8] {
        let data = command.data
        guard data.count > 65, data.count == 65 + Int(data[64]) else { throw U2F.StatusWord.wrongLength }
        let challenge = Array(data[0..<32])
        let application = Array(data[32..<64])
        let handle = Array(data[65...])
        var found: FIDOCredential?
        for credential in try await credentials.credentials()
        where credential.id == handle && credential.answers(application: application)
            && credential.isOffered(verified: false, named: true)
        {
            if await credentials.isUsable(credential) { found = credential }
        }
        guard let credential = found else { throw U2F.StatusWord.wrongData }
        switch U2F.Control(rawValue: command.p1) {
        case .checkOnly: throw U2F.StatusWord.conditionsNotSatisfied
        case nil: throw U2F.StatusWord.wrongData
        // The key signs only after the finger, so "don't enforce" is answered as "enforce".
        case .enforceUserPresenceAndSign, .dontEnforceUserPresenceAndSign: break
        }
        let credentials = self.credentials
        let approve = self.approve
        let reason =
            credential.applicationParameter == nil
            ? "\(credential.relyingParty) wants to sign in (U2F)"
            : "A site wants to sign in with this security key (U2F)"
        return try await withU2FPresence(command, session: session, group: [command.ins] + application + challenge) {
            let right = try await credentials.authorize(credential) { right in try await approve(right, reason) }
            do {
                let counter = Self.bigEndian(try await credentials.countSignature(credential))
                let signature = try await credentials.sign(application + [0x01] + counter + challenge, with: right)
                await right.deauthorize()
                return ([0x01] + counter + signature, nil)
            } catch {
                await right.deauthorize()
                throw error
            }
        }
    }

    /// Runs `operation` (which asks for the finger) once for `command` from `session`, answering "conditions not
    /// satisfied" until it is done, then its answer to the first request that asks again. A request of the same
    /// `group` waits with it (answered "conditions not satisfied"); any other drops it.
    private func withU2FPresence(
        _ command: U2F.Command, session: UInt64, group: [UInt8]? = nil,
        operation: @escaping @Sendable () async throws -> (data: [UInt8], madeCredential: String?)
    ) async throws -> [UInt8] {
        let request = [command.ins, command.p1] + command.data
        let group = group ?? request
        if var presence = u2fPresence, presence.session == session, presence.group == group,
            presence.request != request
        {
            presence.lastAsked = .now
            u2fPresence = presence
            throw U2F.StatusWord.conditionsNotSatisfied
        }
        if var presence = u2fPresence, presence.request == request, presence.session == session {
            guard let answer = presence.answer else {
                presence.lastAsked = .now
                u2fPresence = presence
                throw U2F.StatusWord.conditionsNotSatisfied
            }
            u2fPresence = nil
            switch answer {
            case .success(let data): return data
            // The credential ended meanwhile (the enrolled fingers changed): not this authenticator's any more.
            case .failure(let error as LAError) where error.code == .invalidContext: throw U2F.StatusWord.wrongData
            // The user declined or the prompt failed: the client may ask again, which asks the user again.
            case .failure(is LAError): throw U2F.StatusWord.conditionsNotSatisfied
            case .failure: throw U2F.StatusWord.unknown
            }
        }
        await abandonU2FPresence()
        u2fRequests += 1
        let number = u2fRequests
        let task = Task {
            let answer: Result<(data: [UInt8], madeCredential: String?), any Error>
            do { answer = .success(try await operation()) } catch { answer = .failure(error) }
            await self.u2fFinished(number, answer)
        }
        u2fPresence = U2FPresence(
            request: request, group: group, session: session, number: number, task: task, answer: nil,
            madeCredential: nil, lastAsked: .now)
        // A client that stops asking leaves no prompt and no credential behind, even when no request follows.
        Task {
            while await self.isU2FPresenceWaiting(number) { try? await Task.sleep(for: .seconds(1)) }
        }
        throw U2F.StatusWord.conditionsNotSatisfied
    }

    private func u2fFinished(_ number: UInt64, _ answer: Result<(data: [UInt8], madeCredential: String?), any Error>)
        async
    {
        guard var presence = u2fPresence, presence.number == number else {
            // Abandoned while the user was asked: a credential it made is never handed out.
            if case .success(let made) = answer, let hexID = made.madeCredential {
                try? await credentials.delete(hexID: hexID)
            }
            return
        }
        presence.answer = answer.map(\.data)
        if case .success(let made) = answer { presence.madeCredential = made.madeCredential }
        u2fPresence = presence
    }

    /// Drops the U2F request waiting for the user or for its client: its prompt is cancelled, and a credential it
    /// made but never handed out is deleted. Any CBOR request does this too.
    func abandonU2FPresence() async {
        guard let presence = u2fPresence else { return }
        u2fPresence = nil
        presence.task.cancel()
        if case .success = presence.answer, let hexID = presence.madeCredential {
            try? await credentials.delete(hexID: hexID)
        }
    }

    /// Drops a U2F request whose client stopped asking.
    private func dropStaleU2FPresence() async {
        guard let presence = u2fPresence, ContinuousClock.now - presence.lastAsked > Self.u2fPatience else { return }
        await abandonU2FPresence()
    }

    /// Whether U2F request `number` still waits for its client, once a stale one is dropped.
    private func isU2FPresenceWaiting(_ number: UInt64) async -> Bool {
        await dropStaleU2FPresence()
        return u2fPresence?.number == number
    }
}
