"""Writes bench/obsidian-vault/ (an Obsidian-style vault, English and Chinese, written for this
study) and bench/obsidian-eval.jsonl (its questions). NOTES is also the truth the filter test
checks demo_rag against: each note's tags and date as its owner meant them.

    python bench/obsidian_vault.py        # rewrites both from the tables below
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
VAULT = HERE / "obsidian-vault"
EVAL = HERE / "obsidian-eval.jsonl"

# (path, front matter lines or None, body, tags as meant (front matter and inline), date as meant or None: mtime)
NOTES: list[tuple[str, list[str] | None, str, list[str], str | None]] = []


def note(path, fm, body, tags=(), date=None):
    NOTES.append((path, fm, body, list(tags), date))


# --- English notes with aliases (some in Chinese) -----------------------------------------------
note("Tools/Keyboard Layout.md", ["aliases: [Hotkeys, 快捷键]", "tags: [tool/obsidian]", "created: 2025-11-02"],
     "Ctrl+P opens the command palette and Ctrl+O the quick switcher.\n\n"
     "> [!tip] Remember\n> Alt+Enter follows the link under the cursor.\n", ["tool/obsidian"], "2025-11-02")
note("Cooking/Sourdough Schedule.md", ["aliases:", "  - Bread plan", "  - 面包计划", "tags: cooking/bread",
                                       "date: 2025-12-14"],
     "Feed the starter at 8 in the evening, mix the dough at 7 the next morning, bake at 250 °C for 40 minutes.\n"
     "![[starter-jar.jpg]]\n", ["cooking/bread"], "2025-12-14")
note("Travel/Lisbon Trip.md", ["aliases: [Portugal holiday]", "tags: [travel, family]", "date: 2026-04-10",
                               "description: Five days in April with the kids"],
     "## Hotel\nWe stay at a small guesthouse in Alfama, room 12, breakfast from half past seven.\n\n"
     "## Tram\nTram 28 leaves from Martim Moniz; buy the Viva Viagem card first.\n", ["travel", "family"],
     "2026-04-10")
note("Work/Project Heron.md", ["aliases: [Heron, 苍鹭项目]", "tags: [work/project]", "created: 2026-01-08",
                               "status: active"],
     "Heron replaces the old invoice importer. The deadline is 30 June; Marta owns the parser and "
     "Tom the review queue. See [[Meeting 2026-01-20|the kickoff]].\n", ["work/project"], "2026-01-08")
note("Work/Budget Review.md", ["tags: [work]", "date: 2026-02-03"],
     "We decided to move 12,000 euros from travel to tooling and to freeze new hires until May.\n", ["work"],
     "2026-02-03")
note("Home/Budget.md", ["tags: [home/finance]", "date: 2026-02-05"],
     "We decided to put 300 euros a month aside for the new kitchen and to cancel the second streaming plan.\n",
     ["home/finance"], "2026-02-05")
note("Health/Running Plan.md", ["aliases: [5K training, 跑步计划]", "tags: [health/running]", "date: 2025-10-01"],
     "Three runs a week: intervals on Tuesday, easy on Thursday, long run on Sunday, adding 10 % distance "
     "each week.\n", ["health/running"], "2025-10-01")
note("Reading/Thinking in Systems.md", ["aliases: [Meadows book]", "tags: [reading/book]", "date: 2025-09-12"],
     "Stocks change only through flows; a delay in a balancing loop makes the system oscillate. "
     "Leverage points are ranked, and the goal of the system is near the top.\n", ["reading/book"],
     "2025-09-12")
note("Garden/Tomatoes.md", ["aliases: [番茄, Tomato beds]", "tags: [garden]", "date: 2026-03-20"],
     "Sow indoors in March, plant out after the last frost in mid May, 50 cm apart, and pinch the side "
     "shoots every week.\n", ["garden"], "2026-03-20")
note("Tech/Backup Strategy.md", ["aliases: [3-2-1 rule, 备份]", "tags: [tech/homelab]", "updated: 2026-01-30"],
     "Three copies, two media, one off site: the NAS snapshots nightly at 02:00 and a USB disk goes to "
     "the office every Friday.\n\n%%todo: test a restore\nbefore March%%\n", ["tech/homelab"], "2026-01-30")
note("Tech/Home Network.md", ["aliases: [LAN, 家庭网络]", "tags: [tech/homelab]", "date: 2025-08-22"],
     "The router is at 192.168.1.1; the printer has the fixed address .40 and the guest network is "
     "called Birch.\n", ["tech/homelab"], "2025-08-22")
note("People/Grandma Rosa.md", ["aliases: [Nonna, 外婆]", "tags: [family]", "date: 2025-07-04"],
     "Her birthday is on 9 November; she likes dark chocolate and detective novels, and calls on Sundays "
     "after lunch.\n", ["family"], "2025-07-04")
note("Work/Onboarding Checklist.md", ["aliases: [New starter guide]", "tags: [work/hr]", "date: 2026-01-12"],
     "Day one: laptop, badge and the security course; week one: pair with a buddy and ship one small "
     "fix.\n> [!warning]\n> Never share the staging password by mail.\n", ["work/hr"], "2026-01-12")
note("Cooking/Miso Soup.md", ["aliases: [味噌汤]", "tags: [cooking]", "date: 2025-11-20"],
     "Dashi first, then tofu and wakame; the miso goes in last, off the boil, one tablespoon per cup.\n",
     ["cooking"], "2025-11-20")
note("Learning/Spanish.md", ["aliases: [Español, 西班牙语]", "tags: [learning/language]", "date: 2026-02-18"],
     "Twenty minutes of flashcards a day, a lesson with Lucía on Wednesdays, and the subjunctive is the "
     "next big topic.\n", ["learning/language"], "2026-02-18")
note("Car/Service Log.md", ["aliases: [Maintenance, 保养记录]", "tags: [car]", "date: 2026-03-02"],
     "Oil changed at 48,200 km; winter tyres off after Easter; the next inspection is due in September.\n",
     ["car"], "2026-03-02")
note("Work/Meeting 2026-01-20.md", ["tags: [work/project, meeting]"],
     "Kickoff for [[Project Heron]]: the parser ships first, the review queue second; demo on 14 February.\n",
     ["work/project", "meeting"], "2026-01-20")
note("Work/Meeting 2026-03-11.md", ["tags: [work/project, meeting]"],
     "Heron review: the parser is late by two weeks because of the PDF invoices; the demo moves to "
     "28 March.\n", ["work/project", "meeting"], "2026-03-11")
note("Music/Guitar Practice.md", ["aliases: [吉他练习]", "tags: [hobby/music]", "date: 2025-12-01"],
     "Warm up with chromatic runs, then the F barre chord for five minutes, then one song from the list.\n",
     ["hobby/music"], "2025-12-01")
note("Pets/Cat Care.md", ["aliases: [Mochi, 猫]", "tags: [home/pets]", "date: 2025-10-15"],
     "Mochi gets 60 g of dry food a day in two meals; the vet visit for vaccines is every October.\n",
     ["home/pets"], "2025-10-15")

# --- Chinese notes with English aliases ----------------------------------------------------------
note("工具/快捷键.md", ["aliases: [Shortcuts, Key bindings]", "tags: [tool/editor]", "created: 2025-10-09"],
     "在编辑器里按 Ctrl+Shift+F 全局搜索，按 Ctrl+D 选中下一个相同的词。按 Ctrl+` 打开终端，按 Alt+上下方向键移动整行。\n", ["tool/editor"], "2025-10-09")
note("生活/搬家.md", ["aliases: [Moving house, Move]", "tags: [home/move]", "date: 2026-03-28",
                    "description: 四月搬到新公寓"],
     "新公寓在三楼，押金是两个月房租，四月十五号拿钥匙。[[家庭网络|网络]]要提前一周预约安装。搬家公司约在四月十四号上午九点，旧房子的钥匙十六号还给房东。\n",
     ["home/move"], "2026-03-28")
note("工作/季度目标.md", ["aliases: [OKR, Quarterly goals]", "tags: [work/plan]", "date: 2026-01-05"],
     "第一季度目标：发票导入错误率降到百分之一以下，客户响应时间不超过四小时。第二季度再加一个目标：新导入功能至少有三家客户在用。\n", ["work/plan"], "2026-01-05")
note("读书/人类简史.md", ["aliases: [Sapiens]", "tags: [reading/book]", "date: 2025-08-30"],
     "作者认为农业革命是史上最大的骗局：人类驯化了小麦，也被小麦驯化。书里还说，虚构的故事让成千上万的陌生人能够合作，比如国家和货币。\n", ["reading/book"], "2025-08-30")
note("健康/睡眠.md", ["aliases: [Sleep routine, Sleep]", "tags: [health]", "date: 2025-11-11"],
     "晚上十一点前上床，睡前一小时不看手机，卧室温度保持在十八度左右。周末也尽量在同一时间起床，下午三点以后不喝咖啡。\n", ["health"], "2025-11-11")
note("旅行/京都.md", ["aliases: [Kyoto trip]", "tags: [travel]", "date: 2025-11-25",
                    "description: 秋天看红叶"],
     "住在四条附近的町屋，第二天一早去伏见稻荷，避开人群；岚山的竹林要傍晚去。交通用 ICOCA 卡，公交一日券很划算；清水寺要预留半天。\n", ["travel"], "2025-11-25")
note("美食/红烧肉.md", ["aliases: [Braised pork belly]", "tags: [cooking]", "date: 2026-01-18"],
     "五花肉先焯水，冰糖炒出糖色，加生抽、老抽和黄酒，小火炖九十分钟。最后大火收汁，出锅前撒一点葱花；肉要切成三厘米的方块。\n", ["cooking"], "2026-01-18")
note("财务/记账.md", ["aliases: [Expense tracking]", "tags: [home/finance]", "date: 2026-02-01"],
     "每周日晚上核对账单，餐饮预算每月两千元，超出部分从娱乐预算里扣。每个月一号把工资的两成转到储蓄账户，信用卡账单在十号前还清。\n", ["home/finance"], "2026-02-01")
note("学习/机器学习.md", ["aliases: [ML notes, Machine learning]", "tags: [learning/ai]", "date: 2026-02-22"],
     "过拟合时先增加数据，再加正则化；学习率太大时损失会来回震荡。验证集要和训练集分开，早停可以防止训练太久；先用简单模型做基线。\n", ["learning/ai"], "2026-02-22")
note("家人/小雨.md", ["aliases: [Xiaoyu]", "tags: [family]", "date: 2025-09-01"],
     "小雨九月上二年级，周二和周四下午有游泳课，对花生过敏。她最喜欢的书是《小王子》，班主任姓李，家长会在每学期第六周。\n", ["family"], "2025-09-01")
note("工作/周报模板.md", ["aliases: [Weekly report template]", "tags: [work/template]", "date: 2025-12-08"],
     "周报分三部分：本周完成、下周计划、风险与求助，每周五下午五点前发给组长。风险部分要写清楚影响和需要谁帮忙，不超过三条。\n", ["work/template"], "2025-12-08")
note("植物/多肉.md", ["aliases: [Succulents]", "tags: [garden]", "date: 2025-10-20"],
     "多肉夏天少浇水，大约两周一次；冬天放在朝南的窗台，温度不低于五度。换盆用颗粒土，浇水要浇透，叶子发软说明缺水了。\n", ["garden"], "2025-10-20")
note("技术/服务器.md", ["aliases: [Homelab server, NAS]", "tags: [tech/homelab]", "date: 2026-01-25"],
     "家里的服务器跑 Proxmox，内存三十二 GB，每晚两点自动快照。\n> [!note] 注意\n> 升级前先关掉虚拟机。\n",
     ["tech/homelab"], "2026-01-25")
note("运动/游泳.md", ["aliases: [Swimming]", "tags: [health/sport]", "date: 2026-03-05"],
     "每周三晚上去游泳馆，自由泳一千米，换气时注意不要抬头太高。下水前先热身十分钟，每次游完拉伸肩膀；目标是三十分钟内游完一千五百米。\n", ["health/sport"], "2026-03-05")
note("电影/清单.md", ["aliases: [Watchlist, Movies to see]", "tags: [hobby/film]", "date: 2025-12-20"],
     "想看的电影：《花样年华》、《千与千寻》，还有一部关于登山的纪录片。周五晚上是家庭电影夜，轮流选片，小雨选动画片。\n", ["hobby/film"], "2025-12-20")
note("工作/客户拜访.md", ["aliases: [Client visit]", "tags: [work/sales]", "date: 2026-02-26"],
     "拜访杭州的客户，他们希望下个月试用新的导入功能，联系人是王经理。他们每月处理大约五千张发票，最关心的是错误提示要清楚。\n", ["work/sales"], "2026-02-26")
note("生活/装修.md", ["aliases: [Renovation, Kitchen remodel]", "tags: [home/move]", "date: 2026-03-15"],
     "厨房台面选石英石，橱柜做到顶，水槽下面留出净水器的位置。地板用浅色木纹，灯光分成吊灯和橱柜下的灯带两路开关。\n", ["home/move"], "2026-03-15")
note("宠物/狗狗.md", ["aliases: [Dog, Bobo]", "tags: [home/pets]", "date: 2025-09-18"],
     "豆豆每天早晚各遛一次，每次半小时，每三个月驱虫一次。狗粮每天两百克，分两顿；洗澡一个月一次，用宠物专用的沐浴露。\n", ["home/pets"], "2025-09-18")
note("笔记/写作方法.md", ["aliases: [Writing method, Zettelkasten]", "tags: [learning/writing]",
                         "date: 2025-08-10"],
     "每张卡片只写一个想法，用自己的话写，并且链接到至少一张旧卡片。每周整理一次收件箱，把临时笔记改写成永久笔记，或者删掉。\n", ["learning/writing"], "2025-08-10")

# --- Daily notes: dated by their file name --------------------------------------------------------
DAILY = [
    ("2026-01-05", "Bought apples and leeks at the market; planned the quarter with the team. #work", ["work"]),
    ("2026-01-14", "在市场买了豆腐和白菜。晚上给外婆打电话。她说下周要来住几天，要提前收拾客房，再买一床新被子。#home", ["home"]),
    ("2026-01-22", "Market: bought oranges. Fixed the flaky upload test at work. #work", ["work"]),
    ("2026-02-02", "At the market I bought a pumpkin for soup. Called the plumber about the sink. #home", ["home"]),
    ("2026-02-09", "上班：和王经理确认了试用时间。试用从三月一号开始，为期两周，需要准备一份使用说明和一个演示账号。#work", ["work"]),
    ("2026-02-16", "Bought fresh basil at the market; the cat knocked the pot over. #home", ["home"]),
    ("2026-02-23", "Reviewed the Heron parser with Marta; we agreed to drop the CSV path. #work/project",
     ["work/project"]),
    ("2026-03-03", "市场上买了草莓，很甜。下午去看了新公寓。房间比照片上大，阳台朝南，适合种菜，离地铁站走路五分钟。#home/move", ["home/move"]),
    ("2026-03-09", "Market: bought asparagus. Sprint review went well. #work", ["work"]),
    ("2026-03-17", "Bought seed potatoes at the market and sowed the tomatoes indoors. #garden", ["garden"]),
    ("2026-03-24", "工作：季度复盘，错误率降到了百分之零点八。客户响应时间平均三小时，两个目标都达到了，下季度继续。#work/plan", ["work/plan"]),
    ("2026-04-01", "Packed boxes for the move; the market was closed for the holiday. #home/move", ["home/move"]),
    ("2026-04-07", "Bought cherries at the market; flew to Lisbon in the evening. #travel", ["travel"]),
    ("2026-04-15", "拿到新公寓的钥匙，晚上在新家吃了第一顿饭。网络已经装好了，就是厨房还没有灯，明天找电工来装。#home/move", ["home/move"]),
    ("2026-04-21", "Back at work: the Heron demo is moved again, now to 5 May. #work/project", ["work/project"]),
    ("2026-04-28", "Market: bought rhubarb for a crumble and eggs for the week. #home", ["home"]),
    ("2026-05-04", "Ran 8 km along the river, the longest run so far. #health/running", ["health/running"]),
    ("2026-05-12", "在市场买了樱桃番茄的苗，种在阳台上。每天早上浇一次水，等它长高了再绑支架，希望七月能吃到番茄。#garden", ["garden"]),
    ("2026-05-19", "Heron went live at 10:00; two invoices failed and were fixed by noon. #work/project",
     ["work/project"]),
    ("2026-05-26", "Bought strawberries at the market and made jam with Xiaoyu. #home #family", ["home", "family"]),
]
for day, body, tags in DAILY:
    note(f"Daily/{day}.md", None, body + "\n", tags, day)

# --- Notes without front matter: inline tags, callouts, embeds, a horizontal rule ----------------
note("Inbox/Ideas.md", None,
     "---\n\nA weekly newsletter of the best notes, sent on Sunday mornings. #idea\n\n---\n\n"
     "A shared family calendar on the kitchen tablet. #idea/home\n", ["idea", "idea/home"], None)
note("Inbox/Landlord Meeting.md", None,
     "---\nMeeting with the landlord\nThe deposit is 2400 euros, paid back within 30 days.\n---\n"
     "He fixes the balcony door before we move in, and the meters are read on the day we get the keys.\n", [], None)
note("Inbox/Reading List.md", None,
     "Next up: a book on habits, then one on the history of maps. ![[cover.png]]\n"
     "> [!quote] Line I liked\n> Maps are arguments about the world.\n#reading\n", ["reading"], None)
note("Inbox/Gift Ideas.md", None,
     "For [[Grandma Rosa|Nonna]]: a box of dark chocolate and a new detective novel. "
     "For Xiaoyu: swimming goggles. #family\n", ["family"], None)


def front_matter(lines: list[str] | None) -> str:
    return "" if lines is None else "---\n" + "\n".join(lines) + "\n---\n"


# The questions: by alias only, by title only, needing a tag or date filter, and paraphrases.
QUESTIONS = [
    # alias only (the alias is the only place the name occurs)
    ("alias", "Hotkeys: which key opens the quick switcher?", "Tools/Keyboard Layout.md"),
    ("alias", "What is in my bread plan?", "Cooking/Sourdough Schedule.md"),
    ("alias", "Where do we sleep on the Portugal holiday?", "Travel/Lisbon Trip.md"),
    ("alias", "苍鹭项目的截止日期是什么时候？", "Work/Project Heron.md"),
    ("alias", "How does my 5K training work?", "Health/Running Plan.md"),
    ("alias", "What did I note from the Meadows book?", "Reading/Thinking in Systems.md"),
    ("alias", "番茄什么时候种到外面？", "Garden/Tomatoes.md"),
    ("alias", "How do I follow the 3-2-1 rule?", "Tech/Backup Strategy.md"),
    ("alias", "What does Nonna like?", "People/Grandma Rosa.md"),
    ("alias", "味噌汤怎么做？", "Cooking/Miso Soup.md"),
    ("alias", "What are my Shortcuts for search?", "工具/快捷键.md"),
    ("alias", "Moving house: when do we get the keys?", "生活/搬家.md"),
    ("alias", "What are the OKR targets?", "工作/季度目标.md"),
    ("alias", "What does Sapiens argue?", "读书/人类简史.md"),
    ("alias", "What is my sleep routine?", "健康/睡眠.md"),
    ("alias", "Kyoto trip: where do we stay?", "旅行/京都.md"),
    ("alias", "How do I cook braised pork belly?", "美食/红烧肉.md"),
    ("alias", "What do I do when my ML notes say overfitting?", "学习/机器学习.md"),
    ("alias", "When does Xiaoyu have swimming lessons?", "家人/小雨.md"),
    ("alias", "How often do I water the Succulents?", "植物/多肉.md"),
    # title only (the file name is the only place it occurs)
    ("title", "What is in Keyboard Layout?", "Tools/Keyboard Layout.md"),
    ("title", "What does the Sourdough Schedule say?", "Cooking/Sourdough Schedule.md"),
    ("title", "Lisbon Trip: which tram do we take?", "Travel/Lisbon Trip.md"),
    ("title", "What is on the Onboarding Checklist?", "Work/Onboarding Checklist.md"),
    ("title", "Service Log: when is the next inspection?", "Car/Service Log.md"),
    ("title", "What is in Guitar Practice?", "Music/Guitar Practice.md"),
    ("title", "快捷键有哪些？", "工具/快捷键.md"),
    ("title", "搬家需要注意什么？", "生活/搬家.md"),
    ("title", "周报模板是什么样的？", "工作/周报模板.md"),
    ("title", "服务器的配置是什么？", "技术/服务器.md"),
    # need a tag or a date filter (the same question matches notes outside it)
    ("filter", "What did we decide about the budget?", "Work/Budget Review.md", {"tags": ["work"]}),
    ("filter", "What did we decide about the budget?", "Home/Budget.md", {"tags": ["home"]}),
    ("filter", "What did I buy at the market?", "Daily/2026-02-02.md", {"since": "2026-02-01", "until": "2026-02-07"}),
    ("filter", "What did I buy at the market?", "Daily/2026-03-17.md", {"since": "2026-03-15", "until": "2026-03-20"}),
    ("filter", "What did I buy at the market?", "Daily/2026-05-26.md", {"since": "2026-05-20"}),
    ("filter", "What happened with the Heron demo?", "Daily/2026-04-21.md", {"tags": ["work"], "since": "2026-04"}),
    ("filter", "What happened with Heron?", "Work/Meeting 2026-03-11.md", {"tags": ["meeting"], "since": "2026-03"}),
    ("filter", "在市场买了什么？", "Daily/2026-01-14.md", {"until": "2026-01-31", "tags": ["home"]}),
    ("filter", "What happened with the new apartment?", "Daily/2026-04-15.md",
     {"tags": ["home/move"], "since": "2026-04"}),
    ("filter", "What did I do in the garden?", "Daily/2026-05-12.md", {"tags": ["garden"], "since": "2026-05"}),
    # paraphrases (no name, other words)
    ("paraphrase", "How hot should the oven be for the loaf?", "Cooking/Sourdough Schedule.md"),
    ("paraphrase", "What is the IP of the router at home?", "Tech/Home Network.md"),
    ("paraphrase", "How much dry food does the cat eat?", "Pets/Cat Care.md"),
    ("paraphrase", "Who takes care of the invoice parser?", "Work/Project Heron.md"),
    ("paraphrase", "How much money must we give the landlord as a guarantee?", "Inbox/Landlord Meeting.md"),
    ("paraphrase", "睡前多久不要看手机？", "健康/睡眠.md"),
    ("paraphrase", "厨房台面用什么材料？", "生活/装修.md"),
    ("paraphrase", "狗多久驱虫一次？", "宠物/狗狗.md"),
    ("paraphrase", "一张卡片写几个想法？", "笔记/写作方法.md"),
    ("paraphrase", "What present could I give my grandmother?", "Inbox/Gift Ideas.md"),
]


def main() -> None:
    if VAULT.exists():
        shutil.rmtree(VAULT)
    for path, fm, body, _, _ in NOTES:
        target = VAULT / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(front_matter(fm) + body, encoding="utf-8")
    (VAULT / ".obsidian").mkdir()
    (VAULT / ".obsidian" / "app.json").write_text("{}\n", encoding="utf-8")
    with EVAL.open("w", encoding="utf-8") as f:
        for kind, question, source, *extra in QUESTIONS:
            f.write(json.dumps({"question": question, "answers": [source], "source": source, "kind": kind,
                                **(extra[0] if extra else {})}, ensure_ascii=False) + "\n")
    print(f"{len(NOTES)} notes in {VAULT}, {len(QUESTIONS)} questions in {EVAL}")


if __name__ == "__main__":
    main()
