import Foundation
import KeychainStore
import SecureCrypto
import SecurityProtocol
import WorkThreads

/// Trusted-application lists (`kSecAttrAccess`, macOS's `SecAccess`): an item that carries one is used without a
/// question only by the programs it names, by code digest. Any other program that holds the item's access group
/// is asked through its presenter ("<app> wants to use the item <label>", or "<app> has changed" for a listed app
/// whose code differs), and either allow is then proved by an authentication the engine runs itself: a finger on
/// the reader or the passcode through PAM, never a reuse window or the caller's own context. The asking program's
/// presenter answers the question, but its answer alone grants nothing.
///
/// Reading attributes is not guarded (as on macOS); reading the data, using a key, updating and deleting are.
extension KeychainEngine {
    /// Names every entry of the list an add or update gives (`kSecAttrAccess`, `acls`), if it gives one: "the
    /// calling program" becomes the caller as identified, others take the application identifier the caller's
    /// registry gives their path and digest.
    ///
    /// - Throws: `errSecParam` for a digest that is not 32 bytes or too many programs; `errSecAuthFailed` when
    ///   the caller's own executable cannot be read.
    func nameTrustedApplications(in attributes: inout [String: KeychainValue], caller: CallerIdentity) throws {
        guard case .access(let requested)? = attributes["acls"] else { return }
        attributes["acls"] = .access(try namedAccess(requested, caller: caller))
    }

    private func namedAccess(_ requested: ItemAccess, caller: CallerIdentity) throws -> ItemAccess {
        guard requested.applications.count <= ItemAccess.maximumApplications else {
            throw KeychainStatus(.param, "a trusted-application list holds at most \(ItemAccess.maximumApplications)")
        }
        var named = ItemAccess(descriptor: requested.descriptor, applications: [])
        for entry in requested.applications {
            if entry.isCaller {
                guard let application = caller.application else {
                    throw KeychainStatus(.authFailed, "the calling program's executable cannot be read")
                }
                named = named.trusting(application)
            } else {
                guard entry.codeDigest.count == 32 else {
                    throw KeychainStatus(.param, "a trusted application's code digest is 32 bytes")
                }
                named = named.trusting(caller.application(at: entry.executable, digest: entry.codeDigest))
            }
        }
        return named
    }

    /// Refuses an item with both `kSecAttrAccessControl` and `kSecAttrAccess`, which Apple makes exclusive.
    static func requireOneAccessKind(_ attributes: [String: KeychainValue]) throws {
        guard attributes[ItemKey.accessControl] == nil || attributes["acls"] == nil else {
            throw KeychainStatus(.param, "kSecAttrAccessControl and kSecAttrAccess are exclusive")
        }
    }

    /// The user's answer, and the authentication behind an allow, for a program `needed` names; adds the program
    /// to the item's list after Always allow.
    func confirmTrust(_ needed: NeedsTrust) -> AccessDecision {
        switch needed.authenticationUI {
        case .skip: return .skip
        case .fail: return .denied(.interactionNotAllowed)
        case .allow: break
        }
        guard !needed.prompting.options.interactionNotAllowed, let channel = needed.prompting.channel,
            !channel.isClosed, let authentication
        else {
            return .denied(.interactionNotAllowed)
        }
        guard let choice = channel.confirm(needed.prompt) else { return .denied(.userCanceled) }
        guard choice != .deny else { return .denied(.authFailed) }
        do {
            // A context of the engine's own, with no reuse window: only a new proof of presence counts.
            let context = try authentication.createContext()
            defer { authentication.discard(context) }
            let options = EvaluationOptions(prompt: EvaluationPrompt(reason: needed.prompt.text))
            _ = try BlockingBridge.wait {
                try await authentication.evaluate(.deviceOwner, context: context, options: options, prompts: channel)
            }
            if choice == .alwaysAllow { try trust(needed.program, in: needed.version) }
            return .allowed
        } catch {
            return .denied(KeychainStatus(authenticationFailure: error).code)
        }
    }

    /// Adds `program` to the list of the row `version` names (replacing an entry for an earlier version of it), in
    /// a write of its own. A row that changed meanwhile is left alone: the request meets it again and asks again.
    private func trust(_ program: TrustedApplication, in version: AuthorizationDecisions.Version) throws {
        let events = try database.write { transaction -> [EngineEvent] in
            guard let row = try transaction.item(rowID: version.rowID), row.generation == version.generation else {
                return []
            }
            let item = try sealer.open(row)
            guard case .access(let access)? = item.attributes["acls"] else { return [] }
            var attributes = item.attributes
            attributes["acls"] = .access(access.trusting(program))
            let sealed = try sealer.seal(
                row, attributes: attributes, data: try openData(item, transaction: transaction),
                protectionClass: item.protectionClass)
            try transaction.update(sealed)
            return [event(.updated, sealed)]
        }
        hub.emit(events)
    }
}

extension AuthorizationDecisions {
    /// Whether `caller` may use `item` for `operation` as its trusted-application list stands: allowed at once
    /// when the item has no list or the list trusts the caller's code, else the user's decision taken for this
    /// version of the row; throws ``NeedsTrust`` when there is none yet.
    func trust(
        for item: ItemSealer.OpenedItem, caller: CallerIdentity, operation: AccessControlOperation, query: ItemQuery
    ) throws -> AccessDecision {
        guard case .access(let access)? = item.attributes["acls"] else { return .allowed }
        guard let program = caller.application else { return .denied(.authFailed) }
        if access.trusts(program) { return .allowed }
        let version = Version(item.row, operation: operation)
        if let decision = trusted[version] { return decision }
        throw NeedsTrust(
            version: version, program: program,
            prompt: TrustPrompt(
                application: program.displayName, item: KeychainEngine.displayName(of: item, access: access),
                changed: access.earlierVersion(of: program) != nil),
            authenticationUI: query.authenticationUI, prompting: query.prompting)
    }
}

/// Thrown inside a transaction when a program not on an item's list asks to use it; never leaves the engine.
struct NeedsTrust: Error {
    var version: AuthorizationDecisions.Version
    var program: TrustedApplication
    var prompt: TrustPrompt
    var authenticationUI: AuthenticationUI
    var prompting: Prompting
}

extension KeychainEngine {
    /// How a question names an item: its label, else its service, server or account, else the list's descriptor.
    static func displayName(of item: ItemSealer.OpenedItem, access: ItemAccess) -> String {
        for key in [ItemKey.label, ItemKey.service, "srvr", ItemKey.account] {
            switch item.attributes[key] {
            case .string(let text)? where !text.isEmpty: return text
            case .data(let bytes)? where !bytes.isEmpty:
                if let text = String(validating: bytes, as: UTF8.self) { return text }
            default: continue
            }
        }
        return access.descriptor.isEmpty ? "(unnamed \(item.itemClass.rawValue) item)" : access.descriptor
    }
}

extension TrustedApplication {
    /// This process's own executable (embedded mode, where the calling program is the process itself), read once;
    /// nil when it cannot be read.
    static let thisProcess: TrustedApplication? = reading("/proc/self/exe").map { program in
        var program = program
        program.applicationIdentifier = unregisteredIdentifier(program.codeDigest)
        return program
    }
}
