import Foundation
import Logging
import SecurityServer

/// What the hello of an administrative tool (`administrative = yes`, such as `lactl`) is granted.
///
/// Any program of the user can run such a tool and choose its claim (`LA_ACCESS_GROUPS`, `allGroups`), so the claim
/// alone must not reach other apps' items: the tool holds its own groups (as a registered app does), narrowed to
/// the groups claimed among them, and whatever it claimed beyond them (other groups, or every group) is held back
/// until the user authenticates on the connection (``KeychainEngine/widening(_:context:)``). A daemon configured to
/// trust administrative claims (``DaemonConfiguration/trustsAdministrativeClaims``, for test harnesses that act for
/// many apps from one process) grants the claim at once, as before.
struct AdministrativeGrant {
    /// The groups the connection holds from the hello on.
    let accessGroups: [String]
    /// Whether it may use every group from the hello on.
    let mayAccessAllGroups: Bool
    /// What waits for the user; nil when nothing does.
    let heldBack: AccessClaim?

    /// The grant for a tool whose registration gives `held`, claiming `claimed` (and every group with `allGroups`).
    /// Held back, a claim that names no group asks for the tool's own; trusted, exactly what it names.
    init(held: [String], claimed: [String], allGroups: Bool, trustingClaims: Bool) {
        if trustingClaims {
            accessGroups = claimed
            mayAccessAllGroups = allGroups
            heldBack = nil
            return
        }
        let kept = claimed.filter(held.contains)
        accessGroups = kept.isEmpty ? held : kept
        mayAccessAllGroups = false
        heldBack =
            allGroups || kept.count < claimed.count ? AccessClaim(accessGroups: claimed, allGroups: allGroups) : nil
    }

    /// Logs what is held back, if anything (the tool's executable and registration file).
    func logHeldBack(executable: String, registration: String?) {
        guard let claim = heldBack else { return }
        DaemonServer.logger.info(
            "claims held back until the user authenticates",
            metadata: [
                "executable": "\(executable)", "groups": "\(claim.accessGroups.joined(separator: ","))",
                "allGroups": "\(claim.allGroups)", "registration": "\(registration ?? "none")",
            ])
    }
}
