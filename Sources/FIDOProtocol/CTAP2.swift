/// CTAP 2.1's authenticator API (§6): command bytes, status codes, and the parameter numbers of the commands the
/// authenticator serves.
package enum CTAP2 {
    /// The first byte of a `CTAPHID_CBOR` request.
    package enum Command: UInt8, Sendable {
        case makeCredential = 0x01
        case getAssertion = 0x02
        case getInfo = 0x04
        case clientPIN = 0x06
        case reset = 0x07
        case getNextAssertion = 0x08
        case credentialManagement = 0x0A
        case selection = 0x0B
    }

    /// The first byte of every response (§8.2).
    package enum Status: UInt8, Error, Sendable {
        case ok = 0x00
        case invalidCommand = 0x01
        case invalidParameter = 0x02
        case invalidLength = 0x03
        case invalidCBOR = 0x12
        case missingParameter = 0x14
        case limitExceeded = 0x15
        case credentialExcluded = 0x19
        case processing = 0x21
        case invalidCredential = 0x22
        case userActionPending = 0x23
        case operationPending = 0x24
        case noOperations = 0x25
        case unsupportedAlgorithm = 0x26
        case operationDenied = 0x27
        case keyStoreFull = 0x28
        case unsupportedOption = 0x2B
        case invalidOption = 0x2C
        case keepaliveCancel = 0x2D
        case noCredentials = 0x2E
        case userActionTimeout = 0x2F
        case notAllowed = 0x30
        case pinInvalid = 0x31
        case pinBlocked = 0x32
        case pinAuthInvalid = 0x33
        case pinAuthBlocked = 0x34
        case pinNotSet = 0x35
        case pinUvAuthTokenRequired = 0x36
        case pinPolicyViolation = 0x37
        case requestTooLarge = 0x39
        case actionTimeout = 0x3A
        case userPresenceRequired = 0x3B
        case uvBlocked = 0x3C
        case integrityFailure = 0x3D
        case invalidSubcommand = 0x3E
        case uvInvalid = 0x3F
        case unauthorizedPermission = 0x40
        case other = 0x7F
    }

    /// `authenticatorMakeCredential`'s parameters.
    package enum MakeCredentialKey: Int64 {
        case clientDataHash = 1, rp, user, pubKeyCredParams, excludeList, extensions, options, pinUvAuthParam
        case pinUvAuthProtocol, enterpriseAttestation
    }

    /// `authenticatorGetAssertion`'s parameters.
    package enum GetAssertionKey: Int64 {
        case rpId = 1, clientDataHash, allowList, extensions, options, pinUvAuthParam, pinUvAuthProtocol
    }

    /// COSE's ES256: ECDSA on P-256 with SHA-256, the only algorithm this authenticator makes keys for.
    package static let es256: Int64 = -7
}

/// The authenticator data's flags (WebAuthn §6.1).
package struct AuthenticatorDataFlags: OptionSet, Sendable {
    package let rawValue: UInt8
    package init(rawValue: UInt8) { self.rawValue = rawValue }
    package static let userPresent = AuthenticatorDataFlags(rawValue: 0x01)
    package static let userVerified = AuthenticatorDataFlags(rawValue: 0x04)
    package static let attestedCredentialData = AuthenticatorDataFlags(rawValue: 0x40)
    package static let extensionData = AuthenticatorDataFlags(rawValue: 0x80)
}

extension CBOR {
    /// A P-256 public key as COSE_Key (RFC 9053: kty EC2, alg ES256, crv P-256, x, y), from its X9.63 uncompressed
    /// bytes (`04 || x || y`); nil for anything else.
    package static func coseKey(uncompressedP256 point: [UInt8]) -> CBOR? {
        guard point.count == 65, point[0] == 0x04 else { return nil }
        return .map([
            .int(1): .int(2), .int(3): .int(CTAP2.es256), .int(-1): .int(1), .int(-2): .bytes(Array(point[1..<33])),
            .int(-3): .bytes(Array(point[33..<65])),
        ])
    }
}
