//! A workspace never loses its last owner, even when two owners remove or demote each other at
//! the same moment (the check and the change are one guarded statement, with the owner rows
//! locked first on PostgreSQL).

use outreach_runtime::{Role, admin};

use crate::helpers::{OWNER_EMAIL, spawn_app};

async fn owners(app: &crate::helpers::TestApp) -> i64 {
    sqlx::query_scalar(
        "select count(*) from memberships where workspace_id = $1 and role = 'owner'",
    )
    .bind(&app.workspace_id)
    .fetch_one(app.db.pool())
    .await
    .expect("count owners")
}

#[tokio::test]
async fn two_owners_removing_or_demoting_each_other_at_once_leave_one_owner() {
    let app = spawn_app().await;
    let second = "second-owner@acme.test";
    for round in 0..10 {
        app.add_member(second, Role::Owner).await;
        assert_eq!(owners(&app).await, 2);
        let (a, b) = if round % 2 == 0 {
            tokio::join!(
                admin::remove_member(&app.db, &app.workspace_id, OWNER_EMAIL),
                admin::remove_member(&app.db, &app.workspace_id, second),
            )
        } else {
            tokio::join!(
                admin::set_role(&app.db, &app.workspace_id, OWNER_EMAIL, Role::Admin),
                admin::set_role(&app.db, &app.workspace_id, second, Role::Member),
            )
        };
        assert_eq!(owners(&app).await, 1, "round {round}: {a:?} {b:?}");
        assert!(
            a.is_ok() || b.is_ok(),
            "round {round}: one of them goes through"
        );
        assert!(
            a.is_err() || b.is_err(),
            "round {round}: one of them is refused"
        );
        // Put the workspace back: the original owner as the one owner, the second person out.
        if admin::set_role(&app.db, &app.workspace_id, OWNER_EMAIL, Role::Owner)
            .await
            .is_err()
        {
            admin::add_member(
                &app.db,
                &app.clock,
                &app.workspace_id,
                OWNER_EMAIL,
                Role::Owner,
                None,
            )
            .await
            .expect("re-add the owner");
        }
        admin::remove_member(&app.db, &app.workspace_id, second)
            .await
            .ok();
        assert_eq!(owners(&app).await, 1);
    }
}

#[tokio::test]
async fn the_last_owner_can_be_neither_removed_nor_demoted() {
    let app = spawn_app().await;
    let removal = admin::remove_member(&app.db, &app.workspace_id, OWNER_EMAIL).await;
    assert!(
        removal.unwrap_err().to_string().contains("last owner"),
        "removal refused"
    );
    let demotion = admin::set_role(&app.db, &app.workspace_id, OWNER_EMAIL, Role::Admin).await;
    assert!(demotion.unwrap_err().to_string().contains("last owner"));
    assert_eq!(owners(&app).await, 1);
    // Promoting someone else first makes both possible.
    app.add_member("next@acme.test", Role::Admin).await;
    admin::set_role(&app.db, &app.workspace_id, "next@acme.test", Role::Owner)
        .await
        .expect("promote");
    admin::set_role(&app.db, &app.workspace_id, OWNER_EMAIL, Role::Member)
        .await
        .expect("demote the first owner now");
    assert_eq!(owners(&app).await, 1);
}
