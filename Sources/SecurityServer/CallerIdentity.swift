/// Who is asking: the keychain access groups the caller holds (its `keychain-access-groups` entitlement, in order).
///
/// In embedded mode the groups come from the client's configuration; the daemon derives them from the peer's
/// executable.
package struct CallerIdentity: Sendable, Hashable {
    /// The caller's groups; the first is where items go when a request names none.
    package var accessGroups: [String]
    /// Whether the caller may read and write every group (an administrative tool such as `lactl`, which in
    /// embedded mode runs as the user who owns the files anyway).
    package var mayAccessAllGroups: Bool

    package init(accessGroups: [String], mayAccessAllGroups: Bool = false) {
        self.accessGroups = accessGroups
        self.mayAccessAllGroups = mayAccessAllGroups
    }

    /// Where an item goes when the request names no access group.
    var defaultAccessGroup: String? { accessGroups.first }

    func mayAccess(_ group: String) -> Bool { mayAccessAllGroups || accessGroups.contains(group) }

    /// The groups a query may see; nil = all.
    var visibleGroups: [String]? { mayAccessAllGroups ? nil : accessGroups }
}
