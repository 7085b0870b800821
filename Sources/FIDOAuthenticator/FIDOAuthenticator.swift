import FIDOProtocol
import Foundation
import LocalAuthentication
import SecureCrypto

/// A CTAP authenticator whose credentials are persisted rights (``FIDOCredentials``): `authenticatorGetInfo`,
/// `MakeCredential`, `GetAssertion`, `GetNextAssertion`, `ClientPIN` (a PIN, protocols one and two), `Reset`,
/// `Selection` and `CredentialManagement`. User presence and built-in user verification are one act here: the
/// right's authorization through `approve` (`lactl fido serve`: the finger only, through localauthd or embedded; a credential made without user
/// verification would also take the passcode from a presenter that asks for one); the prompt names the relying
/// party. A PIN verifies the user too (its token sets the UV flag), and the credential's key still signs only after
/// the user's presence. Attestation is `none`.
///
/// Extensions: `hmac-secret` (a credential's two CredRandom values are its right's secret, read only after the
/// finger) and `credProtect`; other extensions are ignored. CTAP1/U2F too (``respondU2F(to:session:)``). Not served:
/// tokens of built-in user verification (so FIDO_2_1 is not claimed).
public actor FIDOAuthenticator {
    /// This authenticator model's AAGUID (a random version 4 UUID chosen for it, the same on every machine).
    public static let aaguid: [UInt8] = [
        0x6C, 0x61, 0x63, 0x74, 0x6C, 0x2D, 0x46, 0x49, 0x8D, 0x4F, 0x2D, 0x6C, 0x6F, 0x63, 0x61, 0x6C,
    ]
    /// The `credProtect` extension's name.
    static let credProtect = "credProtect"
    /// How many credentials an allow list or exclude list may name.
    static let maximumCredentialsInList = 16
    /// How many passkeys a store takes unless told otherwise (`lactl fido serve --max-passkeys`).
    public static let defaultMaximumDiscoverable = 1_000
    /// The longest credential ID this authenticator accepts in a list.
    static let maximumCredentialIDLength = 128

    /// How the user approves: `reason` says what for ("github.com wants to sign in as alice"); the right to
    /// authorize is the new credential's or the signing one's.
    public typealias Approval = @Sendable (_ right: LARight, _ reason: String) async throws -> Void

    let credentials: FIDOCredentials
    let approve: Approval
    /// How many discoverable credentials (passkeys) the store takes; a site cannot fill the keychain past it.
    let maximumDiscoverable: Int
    /// The PIN's state in this power cycle, made at first use.
    var pin: PINSession?
    /// What time it is (``ContinuousClock``'s, unless a test gives its own).
    private let clock: @Sendable () -> ContinuousClock.Instant
    /// When this power cycle began: a reset is taken only within 10 s of it (CTAP 2.1 §6.6).
    private let started: ContinuousClock.Instant
    /// The U2F request waiting for the user or for its client to ask again, and how many have been.
    var u2fPresence: U2FPresence?
    var u2fRequests: UInt64 = 0
    /// What credential management's "next" subcommands continue.
    var managementEnumeration: ManagementEnumeration?
    /// What `GetNextAssertion` continues (CTAP 2.1 §6.3): the credentials left, the request's data, the session
    /// (a CTAPHID channel) that asked, and when it ends (30 s after the last assertion).
    var pendingAssertions:
        (
            credentials: [FIDOCredential], clientDataHash: [UInt8], verified: Bool, hmac: HMACSecretRequest?,
            session: UInt64, deadline: ContinuousClock.Instant
        )?

    /// - Parameters:
    ///   - credentials: where the credentials live.
    ///   - maximumDiscoverable: how many passkeys the store takes before `MakeCredential` answers
    ///     `CTAP2_ERR_KEY_STORE_FULL`.
    ///   - approve: authorizes a right with the user (by default, `authorize(localizedReason:)`).
    public init(
        credentials: FIDOCredentials = FIDOCredentials(),
        maximumDiscoverable: Int = FIDOAuthenticator.defaultMaximumDiscoverable, approve: Approval? = nil
    ) {
        self.init(
            credentials: credentials, maximumDiscoverable: maximumDiscoverable, approve: approve,
            clock: { ContinuousClock.now })
    }

    /// An authenticator reading the time from `clock`: its power cycle begins at the first reading, and a reset is
    /// taken only while a later reading is less than 10 s after it.
    package init(
        credentials: FIDOCredentials = FIDOCredentials(),
        maximumDiscoverable: Int = FIDOAuthenticator.defaultMaximumDiscoverable, approve: Approval? = nil,
        clock: @escaping @Sendable () -> ContinuousClock.Instant
    ) {
        self.clock = clock
        started = clock()
        self.credentials = credentials
        self.maximumDiscoverable = maximumDiscoverable
        let given = approve ?? { right, reason in try await right.authorize(localizedReason: reason) }
        // A request cancelled (CTAPHID's CANCEL, a client that resynchronizes, a U2F request dropped) ends the
        // prompt: deauthorizing a right that is authorizing cancels its evaluation, which frees the reader.
        self.approve = { right, reason in
            try await withTaskCancellationHandler {
                try Task.checkCancellation()
                try await given(right, reason)
                // A cancel that came before the prompt began, or as it ended: the client no longer waits.
                if Task.isCancelled {
                    await right.deauthorize()
                    throw CancellationError()
                }
            } onCancel: {
                Task { await right.deauthorize() }
            }
        }
    }

    /// Answers one `CTAPHID_CBOR` request of `session` (the transport's name for the client: its CTAPHID channel):
    /// a status byte, then the response's CBOR when the status is OK.
    public func respond(to request: [UInt8], session: UInt64 = 0) async -> [UInt8] {
        guard let first = request.first else { return [CTAP2.Status.invalidLength.rawValue] }
        guard let command = CTAP2.Command(rawValue: first) else { return [CTAP2.Status.invalidCommand.rawValue] }
        await abandonU2FPresence()
        if command != .getNextAssertion { pendingAssertions = nil }
        if command != .credentialManagement && command != .credentialManagementPreview { managementEnumeration = nil }
        do {
            let parameters: CBOR? = request.count > 1 ? try CBOR(decoding: Array(request.dropFirst())) : nil
            let response: CBOR
            switch command {
            case .getInfo: response = try await info()
            case .makeCredential: response = try await makeCredential(try Self.map(parameters))
            case .getAssertion: response = try await getAssertion(try Self.map(parameters), session: session)
            case .getNextAssertion: response = try await getNextAssertion(session: session)
            case .clientPIN: response = try await clientPIN(try Self.map(parameters))
            case .reset: response = try await reset()
            case .selection:
                try await askPresence("Select this authenticator")
                response = .map([])
            case .credentialManagement, .credentialManagementPreview:
                response = try await credentialManagement(try Self.map(parameters), session: session)
            }
            return [CTAP2.Status.ok.rawValue] + response.encoded()
        } catch let status as CTAP2.Status {
            return [status.rawValue]
        } catch is CBORError {
            return [CTAP2.Status.invalidCBOR.rawValue]
        } catch is CancellationError {
            return [CTAP2.Status.keepaliveCancel.rawValue]
        } catch let error as LAError {
            return [Self.status(for: error).rawValue]
        } catch {
            return [CTAP2.Status.other.rawValue]
        }
    }

    /// `authenticatorGetInfo`'s answer; `clientPin` says whether a PIN is set (when the keychain cannot say, the
    /// answer is an error rather than a guess).
    func info() async throws -> CBOR {
        Self.info(pinSet: try await credentials.pinRecord().hash != nil)
    }

    static func info(pinSet: Bool) -> CBOR {
        .map([
            // FIDO_2_1 asks for tokens of built-in user verification, not served. FIDO_2_1_PRE's credential
            // management is: getPinToken's token serves it, as the prototype's did.
            .int(1): .array([.text("U2F_V2"), .text("FIDO_2_0"), .text("FIDO_2_1_PRE")]),
            .int(2): .array([.text(credProtect), .text(HMACSecretRequest.name)]),
            .int(3): .bytes(aaguid),
            // makeCredUvNotRqd: a server-side (non-discoverable) credential may be made without user verification, as
            // a second factor; its right then outlives enrollment changes.
            .int(4): .map([
                .text("rk"): .bool(true), .text("up"): .bool(true), .text("uv"): .bool(true),
                .text("plat"): .bool(false),
                .text("clientPin"): .bool(pinSet), .text("makeCredUvNotRqd"): .bool(true),
                .text("credentialMgmtPreview"): .bool(true),
            ]),
            .int(5): .unsigned(UInt64(CTAPHID.maximumMessage)),
            // The PIN/UV protocols ClientPIN will speak. Clients (python-fido2) ask for one before they use built-in
            // user verification; with no `clientPin` and no `pinUvAuthToken` option they then send `uv` alone.
            .int(6): .array([.unsigned(2), .unsigned(1)]),
            .int(7): .unsigned(UInt64(maximumCredentialsInList)),
            .int(8): .unsigned(UInt64(maximumCredentialIDLength)),
            .int(9): .array([.text("usb")]),
            .int(10): .array([.map([.text("alg"): .int(CTAP2.es256), .text("type"): .text("public-key")])]),
            .int(13): .unsigned(UInt64(PINSession.minimumLength)),
        ])
    }

    // MARK: Reset

    /// `authenticatorReset`: within 10 s of the power cycle's start and after the user's presence, every credential
    /// (right, key and record) and the PIN are deleted.
    private func reset() async throws -> CBOR {
        guard clock() - started < .seconds(10) else { throw CTAP2.Status.notAllowed }
        try await askPresence("Reset the FIDO authenticator: delete every passkey and the PIN")
        for credential in try await credentials.credentials() {
            try await credentials.delete(hexID: credential.hexID)
        }
        try await credentials.removePIN()
        pin = nil
        pendingAssertions = nil
        return .map([])
    }

    // MARK: MakeCredential

    private func makeCredential(_ parameters: CBOR) async throws -> CBOR {
        typealias Key = CTAP2.MakeCredentialKey
        let clientDataHash = try Self.required(parameters, Key.clientDataHash.rawValue, \.bytesValue)
        let rp = try Self.required(parameters, Key.rp.rawValue, Self.asMap)
        let user = try Self.required(parameters, Key.user.rawValue, Self.asMap)
        let algorithms = try Self.required(parameters, Key.pubKeyCredParams.rawValue, \.arrayValue)
        let rpID = try Self.required(rp, "id", \.textValue)
        let userID = try Self.required(user, "id", \.bytesValue)
        guard clientDataHash.count == 32, !rpID.isEmpty, userID.count <= 64 else {
            throw CTAP2.Status.invalidParameter
        }
        guard
            algorithms.contains(where: { $0["alg"]?.intValue == CTAP2.es256 && $0["type"]?.textValue == "public-key" })
        else { throw CTAP2.Status.unsupportedAlgorithm }
        let options = try Self.options(parameters[Key.options.rawValue])
        if options["up"] == false { throw CTAP2.Status.invalidOption }
        let discoverable = options["rk"] ?? false
        let pinVerified = try await verifyPINToken(
            parameters, paramKey: Key.pinUvAuthParam.rawValue, protocolKey: Key.pinUvAuthProtocol.rawValue,
            clientDataHash: clientDataHash, permission: .makeCredential, rpID: rpID, spend: true)
        // With a PIN token the `uv` option is ignored (§6.1.2 step 5): the PIN verified the user.
        let fingerVerified = !pinVerified && (options["uv"] ?? false)
        let verified = pinVerified || fingerVerified
        // Once a PIN is set, only a server-side credential may be made without verifying the user
        // (makeCredUvNotRqd).
        if !verified, discoverable, try await credentials.pinRecord().hash != nil {
            throw CTAP2.Status.pinUvAuthTokenRequired
        }

        let excluded = try Self.credentialIDs(parameters[Key.excludeList.rawValue])
        let known = try await credentials.credentials(relyingParty: rpID)
        // A credential that needs user verification is excluded only for a request that verified the user.
        if let match = known.first(where: {
            excluded.contains($0.id) && $0.isOffered(verified: verified, named: true)
        }) {
            // The user's presence first, so a site cannot learn silently which credentials this device holds.
            let approve = self.approve
            guard
                let right = try? await credentials.authorize(
                    match,
                    approve: { right in
                        try await approve(right, "\(rpID): a passkey for this account is already on this device")
                    })
            else { throw CTAP2.Status.operationDenied }
            await right.deauthorize()
            throw CTAP2.Status.credentialExcluded
        }

        // After the exclude list, before the user is asked: a full store would waste their touch.
        if discoverable, try await credentials.credentials().count(where: \.discoverable) >= maximumDiscoverable {
            throw CTAP2.Status.keyStoreFull
        }

        // hmac-secret: two CredRandom values, kept as the right's secret. credProtect: a level from 1 to 3 (others
        // are ignored).
        let requested = try Self.field(parameters, Key.extensions.rawValue, Self.asMap)
        let hmacSecret = requested?[HMACSecretRequest.name]?.boolValue == true
        let protection = requested?[Self.credProtect]?.intValue.flatMap { (1...3).contains($0) ? Int($0) : nil }
        let userName = try Self.field(user, .text("name"), \.textValue).map(Self.truncated)
        let template = FIDOCredential(
            id: (0..<16).map { _ in UInt8.random(in: .min ... .max) }, relyingParty: rpID,
            relyingPartyName: try Self.field(rp, .text("name"), \.textValue).map(Self.truncated), userID: userID,
            userName: userName,
            userDisplayName: try Self.field(user, .text("displayName"), \.textValue).map(Self.truncated),
            discoverable: discoverable,
            madeWithUserVerification: fingerVerified, signatureCount: 0, created: Date(),
            hmacSecret: hmacSecret ? true : nil, protection: protection)
        let reason = "\(rpID) wants to make a passkey" + (userName.map { " for \($0)" } ?? "")
        let approve = self.approve
        let secret = hmacSecret ? try SecureRandom.bytes(64) : nil
        let (credential, publicKey) = try await credentials.create(template, secret: secret) { right in
            try await approve(right, reason)
        }
        guard let coseKey = CBOR.coseKey(uncompressedP256: publicKey) else { throw CTAP2.Status.other }
        var flags: AuthenticatorDataFlags = [.userPresent, .attestedCredentialData]
        if verified { flags.insert(.userVerified) }
        let attested =
            Self.aaguid + [UInt8(credential.id.count >> 8), UInt8(credential.id.count & 0xFF)] + credential.id
            + coseKey.encoded()
        var outputs: [CBOR.Pair] = []
        if let protection { outputs.append(CBOR.Pair(.text(Self.credProtect), .unsigned(UInt64(protection)))) }
        if hmacSecret { outputs.append(CBOR.Pair(.text(HMACSecretRequest.name), .bool(true))) }
        var extensionOutputs: [UInt8] = []
        if !outputs.isEmpty {
            flags.insert(.extensionData)
            extensionOutputs = CBOR.map(outputs).encoded()
        }
        let authenticatorData = Self.authenticatorData(rpID, flags: flags, count: 0) + attested + extensionOutputs
        return .map([.int(1): .text("none"), .int(2): .bytes(authenticatorData), .int(3): .map([])])
    }

    // MARK: GetAssertion

    private func getAssertion(_ parameters: CBOR, session: UInt64) async throws -> CBOR {
        typealias Key = CTAP2.GetAssertionKey
        let rpID = try Self.required(parameters, Key.rpId.rawValue, \.textValue)
        let clientDataHash = try Self.required(parameters, Key.clientDataHash.rawValue, \.bytesValue)
        guard clientDataHash.count == 32 else { throw CTAP2.Status.invalidParameter }
        let options = try Self.options(parameters[Key.options.rawValue])
        if options["rk"] != nil { throw CTAP2.Status.unsupportedOption }
        let silent = options["up"] == false
        // A silent pre-flight does not use the verification up; the assertion after it does.
        let pinVerified = try await verifyPINToken(
            parameters, paramKey: Key.pinUvAuthParam.rawValue, protocolKey: Key.pinUvAuthProtocol.rawValue,
            clientDataHash: clientDataHash, permission: .getAssertion, rpID: rpID, spend: !silent)
        let verified = pinVerified || (options["uv"] ?? false)
        if silent && verified && !pinVerified { throw CTAP2.Status.invalidOption }
        let hmac = silent ? nil : try hmacSecretRequest(parameters[Key.extensions.rawValue])
        // A silent request without an allow list would list the site's passkeys to anyone who asks.
        if silent && parameters[Key.allowList.rawValue] == nil { throw CTAP2.Status.unsupportedOption }
        let allowed = try Self.credentialIDs(parameters[Key.allowList.rawValue])
        var found: [FIDOCredential] = []
        let named = parameters[Key.allowList.rawValue] != nil
        // credProtect hides a credential from a sign-in without user verification. A client's silent pre-flight
        // (named, no signature) is let through: with built-in verification and no token for it, a client has no
        // way to verify the user in a pre-flight, so it could never use a level-3 credential. The pre-flight tells
        // only that a credential the client named is here; the sign-in itself still needs the user verified.
        for credential in try await credentials.credentials(relyingParty: rpID)
        where (named ? allowed.contains(credential.id) : credential.discoverable)
            && credential.isOffered(verified: verified || silent, named: named)
        {
            if await credentials.isUsable(credential) { found.append(credential) }
        }
        guard let first = found.first else { throw CTAP2.Status.noCredentials }
        if silent {
            // A client's pre-flight (up = false), asking which allowed credential is here. The key signs only after
            // the user approves, so the answer names the credential with flags clear, the count unmoved and an
            // empty signature, which no relying party could accept.
            return .map([
                .int(1): .map([.text("id"): .bytes(first.id), .text("type"): .text("public-key")]),
                .int(2): .bytes(Self.authenticatorData(rpID, flags: [], count: first.signatureCount)),
                .int(3): .bytes([]),
            ])
        }
        var assertion = try await assert(
            first, rpID: rpID, clientDataHash: clientDataHash, verified: verified, hmac: hmac)
        // The site's other passkeys follow with GetNextAssertion, from this session, within 30 s.
        if found.count > 1, parameters[Key.allowList.rawValue] == nil {
            assertion.append(CBOR.Pair(.int(5), .unsigned(UInt64(found.count))))
            pendingAssertions = (
                Array(found.dropFirst()), clientDataHash, verified, hmac, session, ContinuousClock.now + .seconds(30)
            )
        }
        return .map(assertion)
    }

    private func getNextAssertion(session: UInt64) async throws -> CBOR {
        guard var pending = pendingAssertions, pending.session == session, ContinuousClock.now < pending.deadline,
            !pending.credentials.isEmpty
        else {
            pendingAssertions = nil
            throw CTAP2.Status.notAllowed
        }
        let next = pending.credentials.removeFirst()
        pendingAssertions = nil
        let assertion = try await assert(
            next, rpID: next.relyingParty, clientDataHash: pending.clientDataHash, verified: pending.verified,
            hmac: pending.hmac)
        if !pending.credentials.isEmpty {
            pending.deadline = ContinuousClock.now + .seconds(30)
            pendingAssertions = pending
        }
        return .map(assertion)
    }

    /// Signs one assertion with `credential` after the user approves.
    private func assert(
        _ credential: FIDOCredential, rpID: String, clientDataHash: [UInt8], verified: Bool, hmac: HMACSecretRequest?
    ) async throws -> [CBOR.Pair] {
        let account = credential.userName ?? credential.userDisplayName
        let reason = "\(rpID) wants to sign in" + (account.map { " as \($0)" } ?? "")
        let approve = self.approve
        let right = try await credentials.authorize(credential) { right in try await approve(right, reason) }
        var flags: AuthenticatorDataFlags = .userPresent
        if verified { flags.insert(.userVerified) }
        do {
            // hmac-secret's output, from the CredRandom values only the authorized right reads.
            var extensions: [UInt8] = []
            if let hmac, credential.hmacSecret == true {
                let output = try hmac.output(secret: try await credentials.secret(of: right), verified: verified)
                flags.insert(.extensionData)
                extensions = CBOR.map([.text(HMACSecretRequest.name): .bytes(output)]).encoded()
            }
            let count = try await credentials.countSignature(credential)
            let authenticatorData = Self.authenticatorData(rpID, flags: flags, count: count) + extensions
            let signature = try await credentials.sign(authenticatorData + clientDataHash, with: right)
            await right.deauthorize()
            var pairs = [
                CBOR.Pair(.int(1), .map([.text("id"): .bytes(credential.id), .text("type"): .text("public-key")])),
                CBOR.Pair(.int(2), .bytes(authenticatorData)), CBOR.Pair(.int(3), .bytes(signature)),
            ]
            if credential.discoverable {
                // The user's names only after user verification (CTAP 2.1 §6.2.2, step 12).
                pairs.append(CBOR.Pair(.int(4), Self.userEntity(credential, withNames: verified)))
            }
            return pairs
        } catch {
            await right.deauthorize()
            throw error
        }
    }

    // MARK: Helpers

    /// `text` cut to 64 bytes at a character boundary, as CTAP 2.1 lets an authenticator keep names (§6.1.2, so an
    /// answer that returns them always fits CTAPHID).
    static func truncated(_ text: String) -> String {
        var kept = ""
        for character in text {
            guard kept.utf8.count + character.utf8.count <= 64 else { break }
            kept.append(character)
        }
        return kept
    }

    /// The authenticator data without attested credential data: SHA-256 of the RP ID, the flags, the count.
    static func authenticatorData(_ rpID: String, flags: AuthenticatorDataFlags, count: UInt32) -> [UInt8] {
        FIDOCredential.hash(rpID) + [flags.rawValue] + bigEndian(count)
    }

    /// A signature count as authenticator data and U2F write it: four bytes, most significant first.
    static func bigEndian(_ count: UInt32) -> [UInt8] {
        [UInt8(count >> 24), UInt8((count >> 16) & 0xFF), UInt8((count >> 8) & 0xFF), UInt8(count & 0xFF)]
    }

    /// A command's parameters: a map, or `cborUnexpectedType`.
    static func map(_ parameters: CBOR?) throws -> CBOR {
        guard let parameters, case .map = parameters else { throw CTAP2.Status.cborUnexpectedType }
        return parameters
    }

    /// `item` when it is a map.
    static func asMap(_ item: CBOR) -> CBOR? { item.mapValue == nil ? nil : item }

    /// The field `key` of the map `parameters` as `value` reads it (`\.bytesValue`, `\.textValue`…); nil when absent.
    ///
    /// - Throws: `cborUnexpectedType` when the field has another type (CTAP 2.1 §8.1's "unexpected type").
    static func field<Value>(_ parameters: CBOR, _ key: CBOR, _ value: (CBOR) -> Value?) throws -> Value? {
        guard let item = parameters[key] else { return nil }
        guard let typed = value(item) else { throw CTAP2.Status.cborUnexpectedType }
        return typed
    }

    static func field<Value>(_ parameters: CBOR, _ key: Int64, _ value: (CBOR) -> Value?) throws -> Value? {
        try field(parameters, .int(key), value)
    }

    /// The field `key` of `parameters`, which must be there: `missingParameter` when absent, `cborUnexpectedType`
    /// when of another type.
    static func required<Value>(_ parameters: CBOR, _ key: CBOR, _ value: (CBOR) -> Value?) throws -> Value {
        guard let typed = try field(parameters, key, value) else { throw CTAP2.Status.missingParameter }
        return typed
    }

    static func required<Value>(_ parameters: CBOR, _ key: Int64, _ value: (CBOR) -> Value?) throws -> Value {
        try required(parameters, .int(key), value)
    }

    static func required<Value>(_ parameters: CBOR, _ key: String, _ value: (CBOR) -> Value?) throws -> Value {
        try required(parameters, .text(key), value)
    }

    /// The boolean options by name; anything but a map of booleans is of an unexpected type.
    static func options(_ options: CBOR?) throws -> [String: Bool] {
        guard let options else { return [:] }
        guard let pairs = options.mapValue else { throw CTAP2.Status.cborUnexpectedType }
        var result: [String: Bool] = [:]
        for pair in pairs {
            guard let name = pair.key.textValue, let value = pair.value.boolValue else {
                throw CTAP2.Status.cborUnexpectedType
            }
            result[name] = value
        }
        return result
    }

    /// The IDs of an allow or exclude list (`PublicKeyCredentialDescriptor`s); entries of another type are skipped.
    static func credentialIDs(_ list: CBOR?) throws -> [[UInt8]] {
        guard let list else { return [] }
        guard let items = list.arrayValue else { throw CTAP2.Status.cborUnexpectedType }
        guard items.count <= maximumCredentialsInList else { throw CTAP2.Status.limitExceeded }
        return try items.compactMap { item in
            let id = try required(item, "id", \.bytesValue)
            let type = try required(item, "type", \.textValue)
            return type == "public-key" && id.count <= maximumCredentialIDLength ? id : nil
        }
    }

    /// The CTAP status of an authorization that failed.
    static func status(for error: LAError) -> CTAP2.Status {
        switch error.code {
        case .userCancel, .systemCancel, .appCancel: .keepaliveCancel
        case .biometryLockout: .uvBlocked
        case .invalidContext: .invalidCredential
        default: .operationDenied
        }
    }
}
