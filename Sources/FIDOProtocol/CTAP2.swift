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
        /// CTAP 2.1's prototype of `credentialManagement` (`FIDO_2_1_PRE`, option `credentialMgmtPreview`).
        case credentialManagementPreview = 0x41
    }

    /// The first byte of every response (§8.2).
    package enum Status: UInt8, Error, Sendable {
        case ok = 0x00
        case invalidCommand = 0x01
        case invalidParameter = 0x02
        case invalidLength = 0x03
        case cborUnexpectedType = 0x11
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

    /// `authenticatorClientPIN`'s parameters (§6.5.5) and its answer's keys.
    package enum ClientPINKey: Int64 {
        case pinUvAuthProtocol = 1, subCommand, keyAgreement, pinUvAuthParam, newPinEnc, pinHashEnc
        case permissions = 9, rpId
    }

    /// `authenticatorClientPIN`'s subcommands (§6.5.5).
    package enum ClientPINCommand: UInt64 {
        case getPINRetries = 1, getKeyAgreement, setPIN, changePIN, getPinToken
        case getPinUvAuthTokenUsingUvWithPermissions, getUVRetries
        case getPinUvAuthTokenUsingPinWithPermissions = 9
    }

    /// `authenticatorCredentialManagement`'s parameters (§6.8).
    package enum CredentialManagementKey: Int64 {
        case subCommand = 1, subCommandParams, pinUvAuthProtocol, pinUvAuthParam
    }

    /// `authenticatorCredentialManagement`'s subcommands (§6.8).
    package enum CredentialManagementCommand: UInt64 {
        case getCredsMetadata = 1, enumerateRPsBegin, enumerateRPsGetNextRP, enumerateCredentialsBegin
        case enumerateCredentialsGetNextCredential, deleteCredential, updateUserInformation
    }

    /// The keys of `authenticatorCredentialManagement`'s subcommand parameters (§6.8).
    package enum CredentialManagementParameter: Int64 {
        case rpIDHash = 1, credentialID, user
    }

    /// The keys of `authenticatorCredentialManagement`'s answers (§6.8).
    package enum CredentialManagementAnswer: Int64 {
        case existingResidentCredentialsCount = 1, maxPossibleRemainingResidentCredentialsCount, rp, rpIDHash
        case totalRPs, user, credentialID, publicKey, totalCredentials, credProtect
    }

    /// What a pinUvAuthToken may be used for (§6.5.5.7).
    package struct Permissions: OptionSet, Sendable {
        package let rawValue: UInt64
        package init(rawValue: UInt64) { self.rawValue = rawValue }
        package static let makeCredential = Permissions(rawValue: 0x01)
        package static let getAssertion = Permissions(rawValue: 0x02)
        package static let credentialManagement = Permissions(rawValue: 0x04)
        package static let bioEnrollment = Permissions(rawValue: 0x08)
        package static let largeBlobWrite = Permissions(rawValue: 0x10)
        package static let authenticatorConfiguration = Permissions(rawValue: 0x20)
    }

    /// COSE's ECDH-ES with HKDF-256, the algorithm a PIN/UV auth protocol's key agreement key names.
    package static let ecdhESHKDF256: Int64 = -25

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
    package static func coseKey(uncompressedP256 point: [UInt8], algorithm: Int64 = CTAP2.es256) -> CBOR? {
        guard point.count == 65, point[0] == 0x04 else { return nil }
        return .map([
            .int(1): .int(2), .int(3): .int(algorithm), .int(-1): .int(1), .int(-2): .bytes(Array(point[1..<33])),
            .int(-3): .bytes(Array(point[33..<65])),
        ])
    }

    /// The X9.63 uncompressed bytes (`04 || x || y`) of a COSE_Key that names an EC2 key on P-256 with 32-byte
    /// coordinates; nil for anything else. Whether the point is on the curve is the importer's check.
    package var uncompressedP256: [UInt8]? {
        guard self[1]?.intValue == 2, self[-1]?.intValue == 1, let x = self[-2]?.bytesValue,
            let y = self[-3]?.bytesValue, x.count == 32, y.count == 32
        else { return nil }
        return [0x04] + x + y
    }
}
