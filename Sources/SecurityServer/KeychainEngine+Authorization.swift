import Foundation
import KeychainStore
import SecurityProtocol

/// Access-control decisions for one request, each taken with no database transaction open and kept for the row as
/// it was when it was matched (its id, generation and sealed attributes).
///
/// A transaction that meets a protected row it has no decision for throws ``NeedsAuthorization`` (or, for a
/// program the row's trusted-application list does not name, ``NeedsTrust``), which rolls it back; ``KeychainEngine/withAuthorizations(_:)`` then asks the evaluator — prompting the user if it must, while
/// no SQLite lock or snapshot is held — and runs the transaction again. A row changed by someone else meanwhile
/// has a new generation, so it is authorized again rather than taking the old decision.
final class AuthorizationDecisions {
    struct Version: Hashable {
        var rowID: Int64
        var generation: Int64?
        var attributes: Data
        var operation: AccessControlOperation

        init(_ row: StoredItem, operation: AccessControlOperation) {
            rowID = row.rowID
            generation = row.generation
            attributes = row.attributes
            self.operation = operation
        }
    }

    private(set) var decided: [Version: AccessDecision] = [:]
    /// The user's answers for programs an item's trusted-application list does not name (`KeychainEngine+Trust`).
    private(set) var trusted: [Version: AccessDecision] = [:]

    /// The decision taken for `item` as it is now; throws ``NeedsAuthorization`` when there is none yet.
    func decision(
        for item: ItemSealer.OpenedItem, policy: AccessControlPolicy, operation: AccessControlOperation,
        query: ItemQuery
    ) throws -> AccessDecision {
        let version = Version(item.row, operation: operation)
        if let decision = decided[version] { return decision }
        throw NeedsAuthorization(
            version: version, policy: policy, authenticationUI: query.authenticationUI,
            context: query.authenticationContext, prompting: query.prompting)
    }

    func record(_ decision: AccessDecision, for version: Version) {
        decided[version] = decision
    }

    /// What `caller` may do with `item` for `operation`: its trusted-application list first (Always allow rewrites
    /// the row, whose access control is then decided for the version met next), then its access control.
    /// Throws ``NeedsTrust`` or ``NeedsAuthorization`` for a decision not taken yet.
    func verdict(
        for item: ItemSealer.OpenedItem, caller: CallerIdentity, operation: AccessControlOperation, query: ItemQuery
    ) throws -> AccessDecision {
        let trust = try trust(for: item, caller: caller, operation: operation, query: query)
        guard trust == .allowed, let policy = item.accessControl else { return trust }
        return try decision(for: item, policy: policy, operation: operation, query: query)
    }

    func recordTrust(_ decision: AccessDecision, for version: Version) {
        trusted[version] = decision
    }
}

/// Thrown inside a transaction when a row needs an access-control decision first; never leaves the engine.
struct NeedsAuthorization: Error {
    var version: AuthorizationDecisions.Version
    var policy: AccessControlPolicy
    var authenticationUI: AuthenticationUI
    var context: AuthenticationContextID?
    var prompting: Prompting
}

extension KeychainEngine {
    /// How many authorizations one request may need (matched rows, plus rows that changed while being authorized)
    /// before it gives up.
    static let maximumAuthorizationRounds = 64

    /// Runs `body` (which opens its own transactions) until it completes with a decision for every protected row
    /// it met, taking each missing decision in between with no transaction open.
    ///
    /// - Throws: what `body` throws; `errSecInteractionNotAllowed` when rows keep changing under the request.
    func withAuthorizations<T>(_ body: (AuthorizationDecisions) throws -> T) throws -> T {
        let decisions = AuthorizationDecisions()
        for _ in 0..<Self.maximumAuthorizationRounds {
            do {
                return try body(decisions)
            } catch let needed as NeedsAuthorization {
                let decision = evaluator.authorize(
                    needed.policy, operation: needed.version.operation, authenticationUI: needed.authenticationUI,
                    context: needed.context, prompting: needed.prompting)
                decisions.record(decision, for: needed.version)
            } catch let needed as NeedsTrust {
                decisions.recordTrust(confirmTrust(needed), for: needed.version)
            }
        }
        throw KeychainStatus(.interactionNotAllowed, "the items kept changing while they were being authorized")
    }
}
