"""The tools of the gang environment, as typed, documented methods: five investigations read one
account each (noisy profile numbers, mutual follows, shared photo, bio template or IP), flag and
unflag mark suspects, submit ends the episode with the flag set."""

from __future__ import annotations

from typing import Any

from env.base import ToolError, tool


class GangTools:
    """The tools of ``GangEnvironment`` (a mixin); episode state lives on the environment."""

    # ----- investigation tools ------------------------------------------------------------------

    @tool(kind="investigation")
    def inspect(self, account_id: str) -> dict[str, Any]:
        """Read an account's profile numbers (age, posts, follower counts are noisy estimates).

        Args:
            account_id: The account to read, e.g. 'u12345'.
        """
        i = self._account(account_id)
        w, rng = self.world, self._rng
        assert w is not None
        a = w.accounts[i]
        self._seen(i)
        return {
            "account_id": a.id,
            "handle": a.handle,
            "age_days": max(1, int(a.age_days * rng.uniform(0.85, 1.15))),
            "posts": max(0, int(a.posts * rng.uniform(0.8, 1.2))),
            "followers": len(w.followers[i]),
            "following": len(w.following[i]),
            "email_verified": a.email_verified,
            "handle_changed_days_ago": a.handle_changed,
        }

    @tool(kind="investigation")
    def investigate_network(self, account_id: str) -> dict[str, Any]:
        """List an account's mutual follows and a sample of who it follows and who follows it.

        Args:
            account_id: The account whose network to read.
        """
        i = self._account(account_id)
        w = self.world
        assert w is not None
        mutual = w.following[i] & w.followers[i]
        result = {
            "account_id": w.id_of(i),
            "mutual": self._ids(mutual, i),
            "mutual_count": len(mutual),
            "following": self._ids(w.following[i] - mutual, i),
            "followers": self._ids(w.followers[i] - mutual, i),
        }
        self._seen(i)
        return result

    @tool(kind="investigation")
    def reverse_image_search(self, account_id: str) -> dict[str, Any]:
        """Search the web and the network for the account's profile photo.

        Args:
            account_id: The account whose photo to search.
        """
        i = self._account(account_id)
        w = self.world
        assert w is not None
        a = w.accounts[i]
        same = self._ids(w.sharing("photo", i), i)
        self._seen(i)
        return {"account_id": a.id, "web_matches": a.web_matches, "same_photo_accounts": same}

    @tool(kind="investigation")
    def analyze_bio(self, account_id: str) -> dict[str, Any]:
        """Score how templated the bio looks and list accounts with a near-identical bio.

        Args:
            account_id: The account whose bio to analyse.
        """
        i = self._account(account_id)
        w = self.world
        assert w is not None
        a = w.accounts[i]
        similar = self._ids(w.sharing_bio(i), i)
        self._seen(i)
        return {
            "account_id": a.id,
            "bio": a.bio,
            "template_score": a.template_score,
            "similar_bios": similar,
        }

    @tool(kind="investigation")
    def check_ip(self, account_id: str) -> dict[str, Any]:
        """Show the account's last login IP, its network type and other accounts on that IP.

        Args:
            account_id: The account whose IP to check.
        """
        i = self._account(account_id)
        w = self.world
        assert w is not None
        a = w.accounts[i]
        sharing = w.sharing("ip", i) - {i}
        listed = self._ids(sharing, i)
        self._seen(i)
        return {
            "account_id": a.id,
            "ip": a.ip,
            "ip_type": a.ip_kind,
            "shared_count": len(sharing),
            "accounts_on_ip": listed,
        }

    @tool(kind="lookup")
    def get_policy(self) -> dict[str, Any]:
        """Read the review policy: what counts as a win and how the decision is graded."""
        s = self.settings
        return {
            "win": f"recall >= {s.recall_to_win} and precision >= {s.precision_to_win}",
            "grade": "weighted precision, recall and unused steps; no submit = 0",
            "no_gang": "some networks have no gang: submit with no flags",
            "step_limit": self.config.max_steps,
        }

    # ----- actions ------------------------------------------------------------------------------

    @tool(kind="action")
    def flag(self, account_id: str) -> str:
        """Mark one account as a gang member (only this account; nothing else is flagged).

        Args:
            account_id: The account to flag.
        """
        i = self._account(account_id)
        if i in self.flagged:
            raise ToolError(f"{account_id} is already flagged")
        self.flagged.add(i)
        return f"flagged {account_id} ({len(self.flagged)} flagged)"

    @tool(kind="action")
    def unflag(self, account_id: str) -> str:
        """Remove a flag set earlier.

        Args:
            account_id: The account to unflag.
        """
        i = self._account(account_id)
        if i not in self.flagged:
            raise ToolError(f"{account_id} is not flagged")
        self.flagged.discard(i)
        return f"unflagged {account_id} ({len(self.flagged)} flagged)"

    @tool(kind="terminal", terminal=True)
    def submit(self) -> str:
        """Submit the flagged accounts as the gang (no flags = 'there is no gang') and end."""
        self._finish("submit")
        return f"submitted {len(self.flagged)} flagged accounts"
