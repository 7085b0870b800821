import FIDOProtocol
import Foundation
import LocalAuthentication
import SecureCrypto

/// What the authenticator keeps about its PIN while it runs (CTAP's "power cycle" is one `lactl fido serve`): the key
/// agreement key, the wrong guesses in a row, and the one pinUvAuthToken with its permissions. The PIN itself and
/// the guesses left live in the keychain (``FIDOCredentials/PINRecord``).
struct PINSession {
    /// A token serves for 10 minutes after it was issued (CTAP 2.1's longest usage period).
    static let tokenLifetime = Duration.seconds(600)
    /// Wrong guesses in a row after which only a new power cycle lets the PIN be tried again.
    static let mismatchesPerPowerCycle = 3
    /// The shortest PIN, in Unicode code points.
    static let minimumLength = 4
    /// The permissions a token may hold here: no bio enrollment, large blobs or configuration are served.
    static let servedPermissions: CTAP2.Permissions = [.makeCredential, .getAssertion, .credentialManagement]

    private(set) var keyAgreement: P256.PrivateKey
    var consecutiveMismatches = 0
    private(set) var token: SecureBytes
    private(set) var permissions: CTAP2.Permissions = []
    private(set) var relyingParty: String?
    private(set) var issued: ContinuousClock.Instant?
    /// The protocol the token was issued under: it is checked with that protocol only.
    private(set) var tokenProtocol: PINUVAuthProtocol?

    init() throws {
        keyAgreement = try P256.PrivateKey()
        token = try SecureBytes(randomCount: 32)
    }

    /// A new key agreement key: after a wrong guess, so a platform that guessed has to agree again.
    mutating func regenerateKeyAgreement() throws { keyAgreement = try P256.PrivateKey() }

    /// A new token with `permissions` (bound to `relyingParty` when given) for `method`; every earlier token stops
    /// working.
    mutating func issueToken(
        _ permissions: CTAP2.Permissions, relyingParty: String?, method: PINUVAuthProtocol
    ) throws {
        token = try SecureBytes(randomCount: 32)
        self.permissions = permissions
        self.relyingParty = relyingParty
        tokenProtocol = method
        issued = .now
    }

    /// Ends the current token without issuing another (a PIN change, a reset).
    mutating func revokeToken() throws {
        token = try SecureBytes(randomCount: 32)
        permissions = []
        relyingParty = nil
        tokenProtocol = nil
        issued = nil
    }

    /// Checks a request's `pinUvAuthParam` against the token: `param` must be the token's code of `message` under
    /// the protocol it was issued for, the token must be live, hold `permission`, and be bound to `relyingParty` (a
    /// token issued without an RP ID is bound to the first it serves). With `spend`, the check uses the
    /// verification up (CTAP 2.1 §6.1.2 step 14.4, §6.2.2 step 9.4): the token serves no further operation, so one
    /// PIN entry verifies the user once.
    ///
    /// - Throws: `CTAP2.Status.pinAuthInvalid` otherwise.
    mutating func verify(
        _ param: [UInt8], of message: [UInt8], method: PINUVAuthProtocol, permission: CTAP2.Permissions,
        relyingParty rpID: String, spend: Bool
    ) throws {
        guard let issued, ContinuousClock.now - issued < Self.tokenLifetime, tokenProtocol == method,
            method.verify(message, signature: param, key: token), permissions.contains(permission),
            relyingParty == nil || relyingParty == rpID
        else { throw CTAP2.Status.pinAuthInvalid }
        relyingParty = rpID
        if spend { permissions = [] }
    }

    /// Checks a credential management request's `pinUvAuthParam` (§6.8): the token's code of `message` under the
    /// protocol it was issued for, live, with the `cm` permission. A token bound to a relying party manages only
    /// its credentials: `relyingPartyHash` must be that party's SHA-256, and a request for every party (nil) is
    /// refused. The token is not spent: one PIN entry serves a whole enumeration.
    ///
    /// - Throws: `CTAP2.Status.pinAuthInvalid` otherwise.
    func verifyManagement(
        _ param: [UInt8], of message: [UInt8], method: PINUVAuthProtocol, relyingPartyHash: [UInt8]?
    ) throws {
        guard let issued, ContinuousClock.now - issued < Self.tokenLifetime, tokenProtocol == method,
            method.verify(message, signature: param, key: token), permissions.contains(.credentialManagement)
        else { throw CTAP2.Status.pinAuthInvalid }
        if let relyingParty {
            guard let relyingPartyHash, FIDOCredential.hash(relyingParty) == relyingPartyHash else {
                throw CTAP2.Status.pinAuthInvalid
            }
        }
    }
}

extension FIDOAuthenticator {
    /// `authenticatorClientPIN` (§6.5.5): the PIN's retries, the key agreement key, setting and changing the PIN,
    /// and tokens for it (`getPinToken`, and `getPinUvAuthTokenUsingPinWithPermissions` for `mc`, `ga` and `cm`). The
    /// finger is asked for by each operation itself, so no token is issued for built-in user verification
    /// (`getPinUvAuthTokenUsingUvWithPermissions` and `getUVRetries` are invalid subcommands).
    func clientPIN(_ parameters: CBOR) async throws -> CBOR {
        typealias Key = CTAP2.ClientPINKey
        let number = try Self.required(parameters, Key.subCommand.rawValue, \.intValue)
        guard let subcommand = CTAP2.ClientPINCommand(rawValue: UInt64(max(number, 0))) else {
            throw CTAP2.Status.invalidSubcommand
        }
        if subcommand == .getPINRetries {
            let record = try await credentials.pinRecord()
            let blocked = (pin?.consecutiveMismatches ?? 0) >= PINSession.mismatchesPerPowerCycle
            return .map([.int(3): .unsigned(UInt64(max(record.retries, 0))), .int(4): .bool(blocked)])
        }
        let protocolNumber = try Self.required(parameters, Key.pinUvAuthProtocol.rawValue, \.intValue)
        guard let method = PINUVAuthProtocol(rawValue: UInt64(max(protocolNumber, 0))) else {
            throw CTAP2.Status.invalidParameter
        }
        switch subcommand {
        case .getKeyAgreement:
            let point = Array(try pinSession().keyAgreement.publicKey.x963Representation)
            guard let key = CBOR.coseKey(uncompressedP256: point, algorithm: CTAP2.ecdhESHKDF256) else {
                throw CTAP2.Status.other
            }
            return .map([.int(1): key])
        case .setPIN:
            let agreement = try Self.required(parameters, Key.keyAgreement.rawValue, Self.asMap)
            let newPIN = try Self.required(parameters, Key.newPinEnc.rawValue, \.bytesValue)
            let param = try Self.required(parameters, Key.pinUvAuthParam.rawValue, \.bytesValue)
            // A PIN already set is changed with changePIN, never set over (§6.5.5.5 step 3).
            guard try await credentials.pinRecord().hash == nil else { throw CTAP2.Status.pinAuthInvalid }
            let secret = try sharedSecret(agreement, method)
            guard method.verify(newPIN, signature: param, key: secret) else { throw CTAP2.Status.pinAuthInvalid }
            let hash = try Self.pinHash(method.decrypt(newPIN, key: secret), method: method)
            try await credentials.updatePIN { record in
                guard record.hash == nil else { throw CTAP2.Status.pinAuthInvalid }
                record = FIDOCredentials.PINRecord(hash: hash)
            }
            return .map([])
        case .changePIN:
            let agreement = try Self.required(parameters, Key.keyAgreement.rawValue, Self.asMap)
            let pinHash = try Self.required(parameters, Key.pinHashEnc.rawValue, \.bytesValue)
            let newPIN = try Self.required(parameters, Key.newPinEnc.rawValue, \.bytesValue)
            let param = try Self.required(parameters, Key.pinUvAuthParam.rawValue, \.bytesValue)
            try await refuseWhenBlocked()
            let secret = try sharedSecret(agreement, method)
            guard method.verify(newPIN + pinHash, signature: param, key: secret) else {
                throw CTAP2.Status.pinAuthInvalid
            }
            try await checkPIN(pinHash, secret: secret, method: method)
            let hash = try Self.pinHash(method.decrypt(newPIN, key: secret), method: method)
            try await credentials.updatePIN { $0.hash = hash }
            try pin?.revokeToken()
            return .map([])
        case .getPinToken, .getPinUvAuthTokenUsingPinWithPermissions:
            let agreement = try Self.required(parameters, Key.keyAgreement.rawValue, Self.asMap)
            let pinHash = try Self.required(parameters, Key.pinHashEnc.rawValue, \.bytesValue)
            // getPinToken's token serves what FIDO_2_1_PRE's did: making credentials, signing in and managing them.
            var permissions: CTAP2.Permissions = PINSession.servedPermissions
            var rpID: String?
            if subcommand == .getPinToken {
                guard parameters[Key.permissions.rawValue] == nil, parameters[Key.rpId.rawValue] == nil else {
                    throw CTAP2.Status.invalidParameter
                }
            } else {
                let asked = try Self.required(parameters, Key.permissions.rawValue, \.intValue)
                guard asked > 0 else { throw CTAP2.Status.invalidParameter }
                permissions = CTAP2.Permissions(rawValue: UInt64(asked))
                guard PINSession.servedPermissions.isSuperset(of: permissions) else {
                    throw CTAP2.Status.unauthorizedPermission
                }
                rpID = try Self.field(parameters, Key.rpId.rawValue, \.textValue)
                // Making credentials and signing in are for one relying party; managing credentials may be.
                if rpID == nil, !permissions.isDisjoint(with: [.makeCredential, .getAssertion]) {
                    throw CTAP2.Status.missingParameter
                }
            }
            try await refuseWhenBlocked()
            let secret = try sharedSecret(agreement, method)
            try await checkPIN(pinHash, secret: secret, method: method)
            var session = try pinSession()
            try session.issueToken(permissions, relyingParty: rpID, method: method)
            pin = session
            return .map([.int(2): .bytes(try method.encrypt(session.token, key: secret))])
        case .getPINRetries, .getPinUvAuthTokenUsingUvWithPermissions, .getUVRetries:
            throw CTAP2.Status.invalidSubcommand
        }
    }

    /// The request's `pinUvAuthParam` checked against the token for `permission` on `rpID`: whether the user was
    /// verified by the PIN. Without one, no PIN verification; a client that sends an empty one (CTAP 2.0's way to
    /// ask for a touch) gets the user's presence asked, then "PIN not set" or "PIN invalid".
    func verifyPINToken(
        _ parameters: CBOR, paramKey: Int64, protocolKey: Int64, clientDataHash: [UInt8],
        permission: CTAP2.Permissions, rpID: String, spend: Bool
    ) async throws -> Bool {
        guard let bytes = try Self.field(parameters, paramKey, \.bytesValue) else { return false }
        if bytes.isEmpty {
            try await askPresence("\(rpID) asks for this authenticator")
            throw try await credentials.pinRecord().hash == nil ? CTAP2.Status.pinNotSet : CTAP2.Status.pinInvalid
        }
        let number = try Self.required(parameters, protocolKey, \.intValue)
        guard let method = PINUVAuthProtocol(rawValue: UInt64(max(number, 0))) else {
            throw CTAP2.Status.invalidParameter
        }
        guard try await credentials.pinRecord().hash != nil else { throw CTAP2.Status.pinNotSet }
        var session = try pinSession()
        try session.verify(
            bytes, of: clientDataHash, method: method, permission: permission, relyingParty: rpID, spend: spend)
        pin = session
        return true
    }

    /// The live PIN session, made at first use.
    func pinSession() throws -> PINSession {
        if let pin { return pin }
        let session = try PINSession()
        pin = session
        return session
    }

    /// The secret shared with the platform whose key agreement key is the COSE key `agreement`.
    ///
    /// - Throws: `CTAP2.Status.invalidParameter` for a key that is not a point on P-256.
    func sharedSecret(_ agreement: CBOR, _ method: PINUVAuthProtocol) throws -> SecureBytes {
        guard let point = agreement.uncompressedP256,
            let peer = try? P256.PublicKey(x963Representation: point)
        else { throw CTAP2.Status.invalidParameter }
        return try method.sharedSecret(from: pinSession().keyAgreement.sharedSecret(with: peer))
    }

    /// No guess is taken when the PIN is blocked, before any key agreement (§6.5.5.6 step 2).
    private func refuseWhenBlocked() async throws {
        let record = try await credentials.pinRecord()
        guard record.hash != nil else { throw CTAP2.Status.pinNotSet }
        guard record.retries > 0 else { throw CTAP2.Status.pinBlocked }
        guard (pin?.consecutiveMismatches ?? 0) < PINSession.mismatchesPerPowerCycle else {
            throw CTAP2.Status.pinAuthBlocked
        }
    }

    /// Checks the encrypted PIN hash a platform sent, once ``refuseWhenBlocked()`` let the request through. A guess
    /// is counted in the keychain before it is compared, so a guess interrupted by a crash or a kill still costs
    /// one; a right guess restores every retry. A hash that does not even decrypt is a wrong guess.
    ///
    /// - Throws: `pinBlocked` when no guesses are left, `pinAuthBlocked` after three wrong guesses in a row in this
    ///   power cycle, `pinInvalid` for a wrong guess.
    private func checkPIN(_ encryptedHash: [UInt8], secret: SecureBytes, method: PINUVAuthProtocol) async throws {
        let counted = try await credentials.updatePIN { record in
            guard record.retries > 0 else { throw CTAP2.Status.pinBlocked }
            record.retries -= 1
        }
        let guess = try? method.decrypt(encryptedHash, key: secret)
        let matches =
            guess.map { guess in
                guess.count == 16
                    && counted.hash.map { stored in guess.withUnsafeBytes { constantTimeEquals($0, stored) } } == true
            } ?? false
        // The session is read again after the awaits above, and changed in place.
        var session = try pinSession()
        guard matches else {
            try session.regenerateKeyAgreement()
            session.consecutiveMismatches += 1
            pin = session
            if counted.retries == 0 { throw CTAP2.Status.pinBlocked }
            if session.consecutiveMismatches >= PINSession.mismatchesPerPowerCycle { throw CTAP2.Status.pinAuthBlocked }
            throw CTAP2.Status.pinInvalid
        }
        session.consecutiveMismatches = 0
        pin = session
        try await credentials.updatePIN { $0.retries = FIDOCredentials.PINRecord.maximumRetries }
    }

    /// The stored form of a new PIN sent padded to 64 bytes with zeros: the first 16 bytes of its SHA-256.
    ///
    /// - Throws: `invalidParameter` for padding that is not 64 bytes; `pinPolicyViolation` for a PIN shorter than
    ///   four code points, longer than 63 bytes, or not UTF-8.
    static func pinHash(_ padded: SecureBytes, method: PINUVAuthProtocol) throws -> [UInt8] {
        guard padded.count == 64 else { throw CTAP2.Status.invalidParameter }
        return try padded.withUnsafeBytes { bytes in
            let length = bytes.firstIndex(of: 0) ?? 64
            let pin = UnsafeRawBufferPointer(rebasing: bytes.prefix(length))
            // Code points counted on the buffer itself, so the PIN is never copied into a String.
            var codePoints = 0
            var decoder = UTF8()
            var iterator = pin.makeIterator()
            decoding: while true {
                switch decoder.decode(&iterator) {
                case .scalarValue: codePoints += 1
                case .emptyInput: break decoding
                case .error: throw CTAP2.Status.pinPolicyViolation
                }
            }
            guard length <= 63, codePoints >= PINSession.minimumLength else { throw CTAP2.Status.pinPolicyViolation }
            return Array(SHA256.hash(pin).prefix(16))
        }
    }

    /// Asks for the user's presence (a reset, a selection, CTAP 2.0's empty `pinUvAuthParam`): a right of its own,
    /// authorized by the finger or the passcode, then forgotten.
    func askPresence(_ reason: String) async throws {
        let right = LARight(requirement: .biometry(fallback: .devicePasscode))
        try await approve(right, reason)
        await right.deauthorize()
    }
}
