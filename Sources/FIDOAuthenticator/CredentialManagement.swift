import FIDOProtocol
import Foundation

/// What `enumerateRPsGetNextRP` or `enumerateCredentialsGetNextCredential` continues (CTAP 2.1 §6.8.3, §6.8.4): the
/// answers left, the subcommand that takes them, and the session (CTAPHID channel) that began the enumeration.
struct ManagementEnumeration {
    var answers: [CBOR]
    let next: CTAP2.CredentialManagementCommand
    let session: UInt64
}

extension FIDOAuthenticator {
    /// `authenticatorCredentialManagement` (§6.8), served under both its command bytes (0x0A, and FIDO_2_1_PRE's
    /// 0x41, which clients use when the authenticator says `credentialMgmtPreview`): the passkeys' count and room,
    /// their relying parties and accounts, deleting one, renaming its user. Every subcommand but the two "next"
    /// ones needs a PIN token with the `cm` permission (getPinToken's token has it); the finger is not asked, as a
    /// security key asks no touch to list or delete. Only discoverable credentials are managed here; `lactl fido
    /// list` and `lactl fido delete` show and remove every credential.
    func credentialManagement(_ parameters: CBOR, session: UInt64) async throws -> CBOR {
        typealias Key = CTAP2.CredentialManagementKey
        typealias Answer = CTAP2.CredentialManagementAnswer
        let number = try Self.required(parameters, Key.subCommand.rawValue, \.intValue)
        guard let subcommand = CTAP2.CredentialManagementCommand(rawValue: UInt64(max(number, 0))) else {
            throw CTAP2.Status.invalidSubcommand
        }
        // An enumeration continues only with its own "next", from the session that began it.
        let enumeration = managementEnumeration
        managementEnumeration = nil
        if subcommand == .enumerateRPsGetNextRP || subcommand == .enumerateCredentialsGetNextCredential {
            guard var enumeration, enumeration.next == subcommand, enumeration.session == session,
                !enumeration.answers.isEmpty
            else { throw CTAP2.Status.notAllowed }
            let answer = enumeration.answers.removeFirst()
            if !enumeration.answers.isEmpty { managementEnumeration = enumeration }
            return answer
        }

        let subcommandParameters = try Self.field(parameters, Key.subCommandParams.rawValue, Self.asMap)
        guard let param = try Self.field(parameters, Key.pinUvAuthParam.rawValue, \.bytesValue) else {
            throw CTAP2.Status.pinUvAuthTokenRequired
        }
        let protocolNumber = try Self.required(parameters, Key.pinUvAuthProtocol.rawValue, \.intValue)
        guard let method = PINUVAuthProtocol(rawValue: UInt64(max(protocolNumber, 0))) else {
            throw CTAP2.Status.invalidParameter
        }
        // The token's code covers the subcommand and its parameters as CTAP2's canonical CBOR.
        let message = [UInt8(subcommand.rawValue)] + (subcommandParameters?.encoded() ?? [])
        func verify(_ relyingPartyHash: [UInt8]?) throws {
            guard let pin else { throw CTAP2.Status.pinAuthInvalid }
            try pin.verifyManagement(param, of: message, method: method, relyingPartyHash: relyingPartyHash)
        }
        let passkeys = try await credentials.credentials().filter(\.discoverable)

        switch subcommand {
        case .getCredsMetadata:
            try verify(nil)
            return .map([
                .int(Answer.existingResidentCredentialsCount.rawValue): .unsigned(UInt64(passkeys.count)),
                .int(Answer.maxPossibleRemainingResidentCredentialsCount.rawValue):
                    .unsigned(UInt64(max(maximumDiscoverable - passkeys.count, 0))),
            ])
        case .enumerateRPsBegin:
            try verify(nil)
            var parties: [(id: String, name: String?)] = []
            for passkey in passkeys where !parties.contains(where: { $0.id == passkey.relyingParty }) {
                parties.append((passkey.relyingParty, passkey.relyingPartyName))
            }
            var answers = parties.map { party -> CBOR in
                var entity = [CBOR.Pair(.text("id"), .text(party.id))]
                if let name = party.name { entity.append(CBOR.Pair(.text("name"), .text(name))) }
                return .map([
                    .int(Answer.rp.rawValue): .map(entity),
                    .int(Answer.rpIDHash.rawValue): .bytes(FIDOCredential.hash(party.id)),
                ])
            }
            return try begin(&answers, total: .int(Answer.totalRPs.rawValue), next: .enumerateRPsGetNextRP, session)
        case .enumerateCredentialsBegin:
            guard let subcommandParameters else { throw CTAP2.Status.missingParameter }
            let rpIDHash = try Self.required(
                subcommandParameters, CTAP2.CredentialManagementParameter.rpIDHash.rawValue, \.bytesValue)
            try verify(rpIDHash)
            var answers: [CBOR] = []
            for passkey in passkeys where FIDOCredential.hash(passkey.relyingParty) == rpIDHash {
                // A passkey whose key cannot be read is left out, so the site's others can still be managed.
                guard let point = try? await credentials.publicKey(of: passkey),
                    let key = CBOR.coseKey(uncompressedP256: point)
                else { continue }
                answers.append(
                    .map([
                        .int(Answer.user.rawValue): Self.userEntity(passkey, withNames: true),
                        .int(Answer.credentialID.rawValue): .map([
                            .text("id"): .bytes(passkey.id), .text("type"): .text("public-key"),
                        ]),
                        .int(Answer.publicKey.rawValue): key,
                        .int(Answer.credProtect.rawValue): .unsigned(UInt64(passkey.protection ?? 1)),
                    ]))
            }
            return try begin(
                &answers, total: .int(Answer.totalCredentials.rawValue), next: .enumerateCredentialsGetNextCredential,
                session)
        case .deleteCredential, .updateUserInformation:
            guard let subcommandParameters else { throw CTAP2.Status.missingParameter }
            let descriptor = try Self.required(
                subcommandParameters, CTAP2.CredentialManagementParameter.credentialID.rawValue, Self.asMap)
            let id = try Self.required(descriptor, "id", \.bytesValue)
            let passkey = passkeys.first { $0.id == id }
            // The token is checked before the answer says whether the credential is here.
            try verify(passkey.map { FIDOCredential.hash($0.relyingParty) })
            guard let passkey else { throw CTAP2.Status.noCredentials }
            if subcommand == .deleteCredential {
                try await credentials.delete(hexID: passkey.hexID)
                return .map([])
            }
            let user = try Self.required(
                subcommandParameters, CTAP2.CredentialManagementParameter.user.rawValue, Self.asMap)
            // The user handle is the account's identity at the relying party: only the names change (§6.8.6).
            guard try Self.required(user, "id", \.bytesValue) == passkey.userID else {
                throw CTAP2.Status.invalidParameter
            }
            // An empty or missing name removes it.
            let name = try Self.field(user, .text("name"), \.textValue).flatMap {
                $0.isEmpty ? nil : Self.truncated($0)
            }
            let displayName = try Self.field(user, .text("displayName"), \.textValue).flatMap {
                $0.isEmpty ? nil : Self.truncated($0)
            }
            try await credentials.updateRecord(hexID: passkey.hexID) { record in
                record.userName = name
                record.userDisplayName = displayName
            }
            return .map([])
        case .enumerateRPsGetNextRP, .enumerateCredentialsGetNextCredential:
            throw CTAP2.Status.notAllowed  // taken above
        }
    }

    /// The first of `answers` with the total under `total`; the rest kept for `next` from `session`.
    private func begin(
        _ answers: inout [CBOR], total: CBOR, next: CTAP2.CredentialManagementCommand, _ session: UInt64
    ) throws -> CBOR {
        guard case .map(var first)? = answers.first else { throw CTAP2.Status.noCredentials }
        first.append(CBOR.Pair(total, .unsigned(UInt64(answers.count))))
        answers.removeFirst()
        if !answers.isEmpty {
            managementEnumeration = ManagementEnumeration(answers: answers, next: next, session: session)
        }
        return .map(first)
    }

    /// A credential's `PublicKeyCredentialUserEntity`: the user handle, and the names when `withNames`.
    static func userEntity(_ credential: FIDOCredential, withNames: Bool) -> CBOR {
        var user = [CBOR.Pair(.text("id"), .bytes(credential.userID))]
        if withNames {
            if let name = credential.userName { user.append(CBOR.Pair(.text("name"), .text(name))) }
            if let display = credential.userDisplayName {
                user.append(CBOR.Pair(.text("displayName"), .text(display)))
            }
        }
        return .map(user)
    }
}
