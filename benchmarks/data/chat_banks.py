"""Text banks for ``make_recall_chats.py``: topics, assistant prose, user facts and their questions.

Everything here was written for stratamem's synthetic recall benchmark. The
generator fills the ``{slots}`` from a seeded RNG. Facts are stated by the
user in passing, inside a longer request about something else; questions use
other words than the statement (a breed vs "dog", "ceramics" vs "pottery").
Each fact also carries *distractors*: sentences that share the question's
words but do not answer it.
"""

from __future__ import annotations

# --- topics: what a session is about, and the assistant's long answers --------------------------

TOPICS: dict[str, dict] = {
    "cooking": {
        "subjects": [
            "a weeknight lentil stew",
            "homemade focaccia",
            "a sheet-pan chicken dinner",
            "meal prep for five lunches",
            "a vegetable curry",
            "a birthday cake without a stand mixer",
            "risotto",
            "fermented hot sauce",
        ],
        "asks": [
            "Can you walk me through {s}? I have about an hour and a pretty basic kitchen.",
            "I want to try {s} this weekend. What should I watch out for?",
            "Could you give me a shopping list and steps for {s}?",
            "My last attempt at {s} came out bland. How do I fix that?",
        ],
        "heads": [
            "Ingredients and prep",
            "Building flavour",
            "Timing",
            "Common mistakes",
            "Storing leftovers",
            "Adjusting for your kitchen",
        ],
        "terms": [
            "onions",
            "garlic",
            "olive oil",
            "stock",
            "salt",
            "lemon zest",
            "cumin",
            "butter",
            "fresh herbs",
            "a heavy pot",
            "the oven",
            "a thermometer",
            "flour",
            "yeast",
            "smoked paprika",
            "tomato paste",
        ],
        "sentences": [
            "Start by getting everything chopped and measured before the heat goes on, because {a} cooks faster than most people expect.",
            "Season in layers: a pinch of salt when the {a} goes in, another when you add {b}, and a final taste at the end.",
            "If you only change one thing, let {a} brown properly; that browning is where most of the depth comes from.",
            "A splash of acid right before serving, like lemon or vinegar, wakes up {a} and keeps the dish from tasting flat.",
            "You can swap {a} for {b} without much trouble, though the texture will be slightly softer.",
            "Keep the heat at medium rather than high; rushing this step is the most common reason {a} scorches.",
            "For {s}, plan on roughly {n} minutes of hands-on work and the rest is waiting.",
            "Leftovers keep for about {n} days in a sealed container, and most of the flavours actually improve overnight.",
            "If the result tastes dull, it is almost always salt or acid rather than a missing spice, so adjust those first.",
            "Using {a} at room temperature helps everything combine evenly and avoids lumps.",
            "A wide pan gives more surface for evaporation, so the sauce thickens in less time than in a deep pot.",
            "Toast whole spices like {a} in a dry pan for a minute until fragrant, then grind or add them whole.",
            "Write down what you changed each time; after two or three rounds you will have a version that is exactly yours.",
            "Resting matters: give it {n} minutes off the heat so the juices settle and the texture sets.",
        ],
    },
    "travel": {
        "subjects": [
            "a long weekend in Lisbon",
            "a rail trip through northern Italy",
            "a road trip along the coast",
            "a first visit to Tokyo",
            "a hiking week in the Dolomites",
            "a cheap city break in Kraków",
            "a family trip to Vancouver",
            "a few days in Marrakech",
        ],
        "asks": [
            "I'm planning {s}. Can you suggest an itinerary?",
            "What should I pack for {s}? I only want to bring a carry-on.",
            "Can you help me budget {s}? I'd like a rough day-by-day cost.",
            "Any tips for getting around during {s} without renting a car?",
        ],
        "heads": ["Getting there", "Where to stay", "Day by day", "Budget", "Packing", "Local tips"],
        "terms": [
            "a rail pass",
            "the airport shuttle",
            "a day pack",
            "travel insurance",
            "a city card",
            "the old town",
            "a ferry",
            "comfortable shoes",
            "a rain jacket",
            "local markets",
            "museum tickets",
            "an early train",
            "a neighbourhood guesthouse",
            "offline maps",
        ],
        "sentences": [
            "For {s}, I would base yourself near {a} so you can walk to most things and save on transit.",
            "Book {a} at least {n} days ahead; prices tend to climb sharply in the final week.",
            "Keep the first day light, since travel days always take longer than the timetable suggests.",
            "If the weather turns, {a} and {b} make a good indoor backup plan.",
            "Carry {a}; even in summer the evenings can be cooler than you expect.",
            "A realistic daily budget is around {n}0 euros for food and local transport if you eat where locals eat.",
            "Download {a} before you leave so you are not relying on patchy roaming data.",
            "Mornings are the best time for popular sights; by midday the queues can double.",
            "Consider {a} if you plan to visit more than three paid sights, as it usually pays for itself.",
            "Leave one afternoon unplanned; some of the best moments on a trip like this are unscheduled.",
            "Check whether {a} needs to be reserved, because some routes sell out on weekends.",
            "Pack layers rather than bulky items, and roll clothes to fit more into a carry-on.",
            "Local markets are good for cheap lunches and for seeing how people actually live there.",
            "Keep digital and paper copies of your bookings in case your phone battery dies.",
        ],
    },
    "code": {
        "subjects": [
            "a Python script that renames photos by date",
            "unit tests for a small Flask app",
            "speeding up a slow pandas groupby",
            "a bash script to back up my home folder",
            "parsing a messy CSV export",
            "a SQL query for monthly active users",
            "setting up pre-commit hooks",
            "a small command-line todo app",
        ],
        "asks": [
            "Can you help me with {s}? I'm fairly new to this.",
            "I'm stuck on {s}. Here's roughly what I tried, but it keeps failing.",
            "What's a clean way to structure {s}?",
            "Could you review my approach to {s} and suggest improvements?",
        ],
        "heads": [
            "The approach",
            "A first version",
            "Handling edge cases",
            "Testing it",
            "Performance notes",
            "Next steps",
        ],
        "terms": [
            "a virtual environment",
            "type hints",
            "a dictionary",
            "a generator",
            "the logging module",
            "pathlib",
            "a context manager",
            "pytest fixtures",
            "an index",
            "vectorised operations",
            "argparse",
            "a try/except block",
            "a config file",
            "environment variables",
        ],
        "sentences": [
            "The core of {s} is small: read the input, transform it, and write the result, so keep those three steps in separate functions.",
            "Use {a} here; it makes the intent clearer and saves you from a class of subtle bugs.",
            "Before optimising, measure: time the slow part with a realistic input of about {n} thousand rows.",
            "Wrap the file handling in {a} so the file is closed even when something goes wrong halfway.",
            "Write one test for the happy path and one for each edge case you already hit, such as empty input.",
            "If the data is large, {a} avoids loading everything into memory at once.",
            "Prefer {a} over string concatenation for paths; it handles separators and joins correctly.",
            "Log what the script is doing at info level and the details at debug level, so you can turn the noise down.",
            "A common pitfall is mutating a list while iterating over it; build a new list instead.",
            "Keep secrets out of the code and read them from {a} instead.",
            "Once it works, add {a} so the next person, including future you, can read the signatures quickly.",
            "Run it on a copy of the data first; a rename or delete script can do a lot of damage in a second.",
            "For repeated lookups, {a} turns a slow linear search into a constant-time one.",
            "Commit the working version before refactoring so you can always get back to it.",
        ],
    },
    "finance": {
        "subjects": [
            "a monthly budget",
            "paying off a credit card balance",
            "starting an emergency fund",
            "choosing between index funds",
            "saving for a house deposit",
            "tracking subscriptions",
            "splitting bills with a roommate",
            "planning for a big purchase",
        ],
        "asks": [
            "Can you help me set up {s}? My income varies a bit month to month.",
            "I keep putting off {s}. Where do I even start?",
            "What's a sensible plan for {s}?",
            "Could you compare a couple of approaches to {s}?",
        ],
        "heads": ["Where you are now", "A simple plan", "Automating it", "Trade-offs", "What to watch", "A checklist"],
        "terms": [
            "a high-yield savings account",
            "automatic transfers",
            "a spreadsheet",
            "fixed costs",
            "variable spending",
            "the interest rate",
            "a sinking fund",
            "low-cost index funds",
            "a spending cap",
            "your pay day",
            "a separate account",
            "the minimum payment",
        ],
        "sentences": [
            "Start by listing {a} and {b} for the last three months; the real numbers are usually a surprise.",
            "Set up {a} for the day after {b}, so saving happens before spending does.",
            "A common target is {n} months of essential costs, but even one month removes a lot of stress.",
            "Pay attention to {a}: a few percentage points compound into a large difference over years.",
            "Give every irregular expense its own {a}, so annual bills stop feeling like emergencies.",
            "Review the plan once a month for the first quarter, then once a quarter after that.",
            "If your income varies, budget from your lowest typical month and treat anything above as a bonus.",
            "Cancel or pause anything you have not used in {n} weeks; you can always resubscribe.",
            "Keep the system boring: fewer accounts and fewer rules mean you will actually stick with it.",
            "When comparing options, look at fees first, since they are the one return you can predict.",
            "Put the plan somewhere visible, such as {a}, and update it in the same sitting every month.",
            "None of this is personal financial advice; for large decisions a fee-only adviser is worth the cost.",
        ],
    },
    "health": {
        "subjects": [
            "sleeping better",
            "cutting back on caffeine",
            "a desk stretching routine",
            "managing afternoon energy slumps",
            "drinking more water",
            "reducing screen time at night",
            "dealing with tension headaches",
            "building a calmer morning routine",
        ],
        "asks": [
            "I've been struggling with {s}. Any practical ideas?",
            "Could you suggest a plan for {s} that fits a busy week?",
            "What does the evidence say about {s}?",
            "Can you give me a simple routine for {s}?",
        ],
        "heads": [
            "Why it happens",
            "Small changes first",
            "A daily routine",
            "Tracking progress",
            "When to get help",
            "Keeping it up",
        ],
        "terms": [
            "a consistent bedtime",
            "morning daylight",
            "a short walk",
            "a glass of water",
            "dim lights",
            "a wind-down routine",
            "a notebook",
            "regular meals",
            "gentle stretching",
            "a timer",
            "caffeine after noon",
            "a cool bedroom",
        ],
        "sentences": [
            "The most reliable lever is {a}; keeping it steady for {n} days usually shows a difference.",
            "Try {a} in the first hour after waking, which helps set your body clock.",
            "Change one thing at a time so you can tell what actually helped.",
            "Keep {a} by the bed and note how you feel each morning on a one-to-five scale.",
            "{a} and {b} are cheap experiments with almost no downside.",
            "If symptoms persist for more than a few weeks or get worse, it is worth seeing a doctor.",
            "Avoid {a}; its effects linger for many hours, longer than most people assume.",
            "A {n}-minute break every hour is easier to keep than one long session at the end of the day.",
            "Expect a few off days; progress here is a trend, not a straight line.",
            "Pair the new habit with something you already do, like making coffee or brushing your teeth.",
            "Set {a} as a reminder until the routine becomes automatic.",
            "This is general information rather than medical advice, so adapt it to what your doctor knows about you.",
        ],
    },
    "fitness": {
        "subjects": [
            "a beginner strength routine",
            "training for a first half marathon",
            "getting back into swimming",
            "improving my posture",
            "a home workout with no equipment",
            "stretching after runs",
            "building up to pull-ups",
            "cycling to work",
        ],
        "asks": [
            "Can you put together {s} for me? I have three evenings a week.",
            "I'd like to start {s}. How should the first month look?",
            "What mistakes do people make with {s}?",
            "Could you help me plan {s} around a busy job?",
        ],
        "heads": ["Warm-up", "The main block", "Progression", "Recovery", "Sample week", "Staying motivated"],
        "terms": [
            "bodyweight squats",
            "a resistance band",
            "rest days",
            "easy runs",
            "a foam roller",
            "proper form",
            "a training log",
            "dead hangs",
            "interval sets",
            "hip mobility",
            "protein",
            "a heart-rate zone",
        ],
        "sentences": [
            "Begin each session with five minutes of light movement and a few sets of {a} to warm up.",
            "Progress slowly: add about {n} percent per week, not more, to give tendons time to adapt.",
            "Keep {a} in your plan; that is when the body actually gets stronger.",
            "Record every session in {a} so you can see progress on days it does not feel like it.",
            "Form comes before load: film a set of {a} on your phone and compare it to a good example.",
            "If something hurts sharply rather than just feeling hard, stop and rest it.",
            "Most of your running should be {a}, at a pace where you could hold a conversation.",
            "{a} and {b} are worth ten minutes after each session.",
            "Aim for consistency over intensity; three moderate weeks beat one heroic week and a month off.",
            "A deload week every fourth week keeps fatigue from piling up.",
            "Eat enough {a}, especially on training days, to support recovery.",
            "Pick a fixed time slot and treat it like an appointment you cannot move.",
        ],
    },
    "garden": {
        "subjects": [
            "growing tomatoes on a balcony",
            "reviving a dying houseplant",
            "starting a compost bin",
            "planting a herb box",
            "dealing with aphids",
            "choosing plants for a shady corner",
            "a small vegetable bed",
            "overwintering potted plants",
        ],
        "asks": [
            "Can you help with {s}? I have very little space.",
            "I'm trying {s} for the first time. What should I know?",
            "What's the best way to go about {s}?",
            "Any advice on {s}? Last year it didn't go well.",
        ],
        "heads": ["Light and soil", "Watering", "Feeding", "Pests", "Through the seasons", "A simple schedule"],
        "terms": [
            "drainage holes",
            "peat-free compost",
            "a slow-release feed",
            "mulch",
            "morning watering",
            "a south-facing spot",
            "neem oil",
            "terracotta pots",
            "seedlings",
            "a trellis",
            "leaf mould",
            "companion planting",
        ],
        "sentences": [
            "Light is usually the limiting factor, so watch how many hours of sun the spot really gets.",
            "Use containers with {a}; standing water rots roots faster than drought kills them.",
            "{a} holds moisture well and is kinder to the environment than the older mixes.",
            "Water deeply and less often, ideally {a}, so the leaves dry before evening.",
            "A layer of {a} keeps the soil cool and cuts watering by a lot in summer.",
            "Feed every {n} weeks during the growing season and stop in late autumn.",
            "For pests, start gentle: a strong spray of water, then {a} if they come back.",
            "{a} and {b} together make a small space far more productive.",
            "Rotate pots a quarter turn each week so plants do not lean toward the window.",
            "Yellow lower leaves usually mean too much water rather than too little.",
            "Keep notes on what you planted and when; next spring you will be glad you did.",
            "Bring tender plants in before the first frost, which is often earlier than the calendar suggests.",
        ],
    },
    "home": {
        "subjects": [
            "fixing a dripping tap",
            "painting a small bedroom",
            "hanging heavy shelves",
            "sealing drafty windows",
            "unclogging a slow drain",
            "organising a cluttered garage",
            "patching a hole in drywall",
            "choosing a cordless drill",
        ],
        "asks": [
            "How do I go about {s}? I'm not very handy.",
            "Can you give me step-by-step instructions for {s}?",
            "What tools do I need for {s}?",
            "I tried {s} once and made a mess. What did I do wrong?",
        ],
        "heads": ["Tools and materials", "Preparation", "Step by step", "Safety", "Finishing", "If it goes wrong"],
        "terms": [
            "a stud finder",
            "painter's tape",
            "wall anchors",
            "a spirit level",
            "silicone sealant",
            "a plunger",
            "a putty knife",
            "drop cloths",
            "a utility knife",
            "safety glasses",
            "an adjustable wrench",
            "sandpaper",
        ],
        "sentences": [
            "Turn off the supply before you start, and keep a towel and a bucket within reach.",
            "You will need {a}, {b} and about {n} minutes if nothing is seized.",
            "Use {a} to find a solid fixing point; plasterboard alone will not hold much weight.",
            "Preparation is most of the job: protect the floor with {a} and mask edges with {b}.",
            "Work in thin layers; two light coats always look better than one heavy one.",
            "Wear {a}, even for a quick job; debris has a way of finding your eyes.",
            "If a part is stuck, do not force it; a little penetrating oil and patience save a broken fitting.",
            "Check the result with {a} before the filler or adhesive sets.",
            "Take a photo of how things are connected before you take them apart.",
            "Buy one spare of every small part; hardware stores close right when you need them.",
            "Let it cure for {n} hours before putting weight or water on it.",
            "If you find rot, wiring or asbestos-era materials, stop and call a professional.",
        ],
    },
    "career": {
        "subjects": [
            "rewriting my CV",
            "preparing for a job interview",
            "asking for a raise",
            "writing a cover letter",
            "giving feedback to a colleague",
            "running better meetings",
            "negotiating a job offer",
            "building a portfolio",
        ],
        "asks": [
            "Can you help me with {s}? I want to get it right.",
            "I have to deal with {s} next week. How should I prepare?",
            "What's a good structure for {s}?",
            "Could you give me some examples for {s}?",
        ],
        "heads": ["What they are looking for", "Structure", "Examples", "Pitfalls", "Preparation", "Following up"],
        "terms": [
            "concrete numbers",
            "the STAR format",
            "a one-page summary",
            "a clear agenda",
            "market data",
            "specific examples",
            "a short follow-up email",
            "your strongest project",
            "active verbs",
            "a practice run",
            "written notes",
            "a timeline",
        ],
        "sentences": [
            "Lead with impact: {a} beat adjectives every time.",
            "Use {a} for each story: the situation, the task, what you did and what changed.",
            "Keep it to {n} points at most; people remember three things, not ten.",
            "Bring {a} so the conversation stays anchored in facts rather than feelings.",
            "Do {a} out loud with a friend; what sounds fine in your head often runs long.",
            "Send {a} within a day that restates what was agreed.",
            "Cut anything that does not support the role you are going for, even if you are proud of it.",
            "Ask what success looks like after {n} months; it tells you what really matters to them.",
            "Avoid apologising for asking; frame it as a discussion about the value you bring.",
            "Tailor the first paragraph to the organisation; generic openings are easy to spot.",
            "Start with {a} and let the details follow.",
            "Silence after an offer or a question is fine; do not rush to fill it.",
        ],
    },
    "music": {
        "subjects": [
            "practising scales without getting bored",
            "learning to read sheet music",
            "recording a song at home",
            "tuning by ear",
            "building finger strength",
            "playing with a metronome",
            "choosing a first microphone",
            "memorising a piece",
        ],
        "asks": [
            "Any advice on {s}? I practise about half an hour a day.",
            "Can you give me a plan for {s}?",
            "What's the best way to approach {s}?",
            "I'm frustrated with {s}. How do people get past this?",
        ],
        "heads": ["Warming up", "Focused practice", "A weekly plan", "Gear", "Listening", "Keeping it fun"],
        "terms": [
            "a metronome",
            "slow practice",
            "short daily sessions",
            "a practice journal",
            "recordings of yourself",
            "a tuner app",
            "simple songs",
            "a teacher",
            "headphones",
            "an audio interface",
            "chunking",
            "sight-reading",
        ],
        "sentences": [
            "{a} works better than marathon weekends; the brain consolidates between sessions.",
            "Set {a} about {n} beats per minute below where you can play cleanly, then creep up.",
            "Listen back to {a}; you will hear things you cannot notice while playing.",
            "Break the piece into small sections, a technique called {a}, and join them only when each is solid.",
            "Keep {a} with one line per session: what you worked on and what felt hard.",
            "Mix technical work with {a} so practice still feels like making music.",
            "Relax your shoulders and hands; tension is the enemy of speed and tone.",
            "A few lessons with {a} can fix habits that would take months to notice alone.",
            "End each session with something you enjoy playing, so you look forward to the next one.",
            "Record with {a} and {b} if you want cleaner sound without much fuss.",
            "Expect plateaus; they usually come right before a jump in ability.",
            "Warm up for {n} minutes before anything demanding.",
        ],
    },
}

GENERIC_SENTENCES = [
    "That is a lot to take in at once, so here is the short version before the details.",
    "There is no single right answer here, but a few principles hold in almost every case.",
    "Let me know if any step is unclear and I can go into more detail.",
    "The good news is that small, steady changes add up faster than big one-off efforts.",
    "It helps to decide in advance what a good result looks like, so you know when to stop tweaking.",
    "Most people overestimate what they can do in a week and underestimate what they can do in a month.",
    "If you are short on time, the first two points matter far more than the rest.",
    "Below I have grouped the advice so you can skim to the part that matters to you.",
    "Everything here can be adapted; treat it as a starting point rather than a rulebook.",
    "A quick recap at the end should make it easier to come back to later.",
]

OPENERS = [
    "Great question.",
    "Happy to help with that.",
    "Sure, let's break it down.",
    "Good idea to plan this.",
    "Here's how I would approach it.",
    "That's very doable.",
]
CLOSERS = [
    "If you tell me more about your situation, I can tailor this further.",
    "Want me to turn this into a printable checklist?",
    "Good luck, and let me know how it goes.",
    "Happy to adjust any of this if your plans change.",
    "I hope that gives you a solid place to start.",
]

FOLLOWUPS = [
    "Thanks, that's helpful. Could you say more about the {h} part?",
    "Okay. What would you change if I only had half the time?",
    "Makes sense. Can you summarise the key steps in a short list?",
    "Got it, thanks! One more question about {h}: what's the most common mistake?",
    "Perfect. Is there anything I should avoid doing?",
    "Appreciate it. How would I know if it's working?",
]

CHATTER = [
    "It's been a hectic week.",
    "Sorry if this is a basic question.",
    "I'm trying to be more organised this year.",
    "A friend suggested I ask you.",
    "I've read a few articles but they all disagree.",
    "Hope you can help.",
    "I keep going back and forth on this.",
    "No rush on this one.",
]

# --- user facts stated once, in passing ----------------------------------------------------------
# Each: values (tuples), statements (in passing), questions (paraphrased), answer, distractors.

FACTS: list[dict] = [
    {
        "key": "pet",
        "values": [
            ("greyhound", "Pixel"),
            ("beagle", "Waffles"),
            ("border collie", "Juno"),
            ("dachshund", "Pretzel"),
            ("whippet", "Comet"),
            ("corgi", "Maple"),
        ],
        "say": [
            "my {0} {1} has figured out how to open the pantry door, so everything is on high shelves now",
            "walking {1}, my {0}, before work has become the calmest part of my day",
            "I'll be typing one-handed because {1} (my {0}) is asleep on my arm",
        ],
        "ask": ["What is my dog's name?", "What did I say my dog is called?"],
        "answer": "{1}",
        "distract": [
            "my neighbour's dog barks at every delivery van",
            "the dog park near us is closed for repairs",
            "my coworker keeps showing me photos of her new puppy",
        ],
    },
    {
        "key": "commute",
        "values": [
            ("forty-minute", "train"),
            ("hour-long", "bus"),
            ("twenty-five-minute", "ferry"),
            ("fifty-minute", "tram"),
        ],
        "say": [
            "I get most of my reading done on the {0} {1} ride into the office",
            "the {0} {1} each way eats into my evenings more than I'd like",
        ],
        "ask": [
            "How long does it take me to get to work, and how do I travel?",
            "What is my daily journey to my job like?",
        ],
        "answer": "a {0} {1} ride",
        "distract": ["work has been busy so I'm taking fewer breaks", "my job has a lot of meetings this month"],
    },
    {
        "key": "instrument",
        "values": [("cello",), ("banjo",), ("clarinet",), ("ukulele",), ("trumpet",), ("harp",)],
        "say": [
            "my fingers are sore from an hour on the {0} last night",
            "I finally bought a second-hand {0} and I'm working through a beginner book",
        ],
        "ask": ["Which musical instrument am I learning to play?", "What instrument did I pick up recently?"],
        "answer": "the {0}",
        "distract": [
            "I went to a concert where the orchestra played something modern",
            "my nephew wants to learn music",
        ],
    },
    {
        "key": "allergy",
        "values": [("shellfish",), ("sesame",), ("peanuts",), ("kiwi fruit",), ("walnuts",)],
        "say": [
            "I have to be careful because {0} makes my throat swell up",
            "I break out in hives whenever I eat anything with {0} in it",
        ],
        "ask": ["What food allergy do I have?", "Which ingredient am I allergic to?"],
        "answer": "{0}",
        "distract": ["my friend has a gluten allergy so I've been reading labels", "spring allergies have been rough"],
    },
    {
        "key": "degree",
        "values": [
            ("marine biology",),
            ("architecture",),
            ("philosophy",),
            ("mechanical engineering",),
            ("art history",),
        ],
        "say": [
            "back when I studied {0} at university I pulled plenty of all-nighters",
            "my {0} degree didn't prepare me for any of this",
        ],
        "ask": ["What was my major in college?", "What subject did I get my degree in?"],
        "answer": "{0}",
        "distract": ["my cousin just started college", "I've been thinking about taking an online course"],
    },
    {
        "key": "hometown",
        "values": [("Duluth",), ("Aberdeen",), ("Tasmania",), ("Winnipeg",), ("Bergen",)],
        "say": [
            "growing up in {0}, we never had a summer warm enough for this",
            "my parents still live in {0}, where I was raised",
        ],
        "ask": ["Where did I grow up?", "Which place am I originally from?"],
        "answer": "{0}",
        "distract": ["I grew tired of the same routine", "where I live now is fine but noisy"],
    },
    {
        "key": "sibling",
        "values": [
            ("sister", "Dana", "a midwife"),
            ("brother", "Tomas", "a firefighter"),
            ("sister", "Priya", "a patent lawyer"),
            ("brother", "Eli", "a pastry chef"),
        ],
        "say": [
            "my {0} {1} just qualified as {2} after years of training",
            "{1}, my {0}, works as {2} and has the strangest hours",
        ],
        "ask": ["What does {1} do for a living?", "What is {1}'s profession?"],
        "answer": "{2}",
        "distract": ["{1} sent me a funny video yesterday", "{1} and I are planning a trip someday"],
    },
    {
        "key": "race",
        "values": [
            ("10K", "52 minutes"),
            ("half marathon", "1 hour 58 minutes"),
            ("5K", "24 minutes"),
            ("trail race", "2 hours 10 minutes"),
        ],
        "say": [
            "I finished my first {0} in {1}, which I'm still a bit smug about",
            "ever since my {0} (I crossed the line in {1}) I've been eyeing a longer one",
        ],
        "ask": ["What was my finishing time in my first running event?", "How fast did I complete my first race?"],
        "answer": "{1} ({0})",
        "distract": ["running in the rain last week was miserable", "a colleague asked me to join a relay"],
    },
    {
        "key": "child",
        "values": [
            ("daughter", "Lina", "seven"),
            ("son", "Oskar", "five"),
            ("daughter", "Maya", "nine"),
            ("son", "Rafi", "eleven"),
        ],
        "say": [
            "{1} turns {2} next month and wants a dinosaur party",
            "my {0} {1} is about to turn {2} and already negotiates like a lawyer",
        ],
        "ask": ["How old is my kid going to be on their next birthday?", "What age is {1} turning?"],
        "answer": "{2}",
        "distract": ["my friend's kid has a birthday coming up", "kids' parties are so expensive these days"],
    },
    {
        "key": "car",
        "values": [
            ("a 2011 Subaru Outback",),
            ("an old Volvo estate",),
            ("a secondhand Mazda 3",),
            ("a tiny Fiat Panda",),
        ],
        "say": [
            "{0} needs new tyres again, so money is a bit tight",
            "I managed to fit all of it into {0}, which surprised me",
        ],
        "ask": ["What car do I drive?", "What kind of vehicle do I own?"],
        "answer": "{0}",
        "distract": ["the parking near work is impossible", "my friend just bought an electric car"],
    },
]

# --- facts that change later (knowledge updates): old statement, then new one ---------------------

UPDATES: list[dict] = [
    {
        "key": "city",
        "values": [
            ("Portland", "Denver"),
            ("Leeds", "Bristol"),
            ("Austin", "Chicago"),
            ("Lyon", "Montreal"),
            ("Adelaide", "Perth"),
        ],
        "old": [
            "since I live in {0}, anything outdoors depends on the weather",
            "the rent in {0} keeps going up, so I'm watching every expense",
        ],
        "new": [
            "now that we've moved to {1}, everything takes a bit longer to find",
            "we finally finished unpacking in {1} after the move",
        ],
        "ask": ["Which city am I living in these days?", "Where is my home at the moment?"],
        "answer": "{1} (moved from {0})",
    },
    {
        "key": "job",
        "values": [
            ("a nurse on a night ward", "a clinical trainer"),
            ("a junior accountant", "a financial analyst"),
            ("a primary school teacher", "an education consultant"),
            ("a barista", "a coffee roaster"),
            ("a graphic designer", "a product manager"),
        ],
        "old": [
            "working as {0} leaves me pretty drained by the end of the week",
            "as {0} I don't get many quiet moments",
        ],
        "new": [
            "I started my new position as {1} last week and I'm still learning names",
            "since switching careers to become {1} my schedule is totally different",
        ],
        "ask": ["What is my current occupation?", "What do I do for work right now?"],
        "answer": "{1} (was {0})",
    },
    {
        "key": "petname",
        "values": [("Mochi", "Biscuit"), ("Pepper", "Sergeant"), ("Olive", "Nova"), ("Toast", "Marlowe")],
        "old": [
            "our new kitten {0} knocks everything off the counter",
            "{0}, the kitten, has claimed my laptop bag as a bed",
        ],
        "new": [
            "we ended up renaming the kitten {1} because the old name never stuck",
            "the kitten answers to {1} now, the family voted to rename her",
        ],
        "ask": ["What is my cat called now?", "What's the current name of my cat?"],
        "answer": "{1} (was {0})",
    },
    {
        "key": "pb",
        "values": [("27:40", "25:15"), ("31:05", "28:50"), ("24:30", "22:58")],
        "old": ["my 5K personal best is {0} and I'd love to beat it", "I've been stuck at a 5K time of {0} for ages"],
        "new": ["I finally ran a 5K in {1} on Saturday, a new best", "new record: {1} for the 5K this morning"],
        "ask": ["What's my fastest time over five kilometres?", "What is my current 5K record?"],
        "answer": "{1} (was {0})",
    },
    {
        "key": "spanish",
        "values": [("A2", "B1"), ("B1", "B2"), ("A1", "A2")],
        "old": [
            "my Spanish is stuck at {0} level even after a year of the app",
            "I just tested at {0} in Spanish, which is humbling",
        ],
        "new": [
            "I passed the {1} Spanish exam last month, so I'm more confident now",
            "my Spanish certificate came through, {1} level officially",
        ],
        "ask": ["What level is my Spanish at now?", "Which language level did I most recently reach?"],
        "answer": "{1} (was {0})",
    },
    {
        "key": "gym",
        "values": [
            ("the climbing gym on Fifth Street", "the community pool"),
            ("a boxing club", "a yoga studio"),
            ("the university gym", "a CrossFit box"),
        ],
        "old": ["I have a membership at {0} that I use twice a week", "my evenings usually end at {0}"],
        "new": [
            "I cancelled my old membership and joined {1} instead",
            "these days I train at {1}, it's closer to the new place",
        ],
        "ask": ["Where do I currently work out?", "Which fitness place am I a member of now?"],
        "answer": "{1} (was {0})",
    },
]

# --- implied preferences: a hint, then "can you recommend ..." -------------------------------------

PREFERENCES: list[dict] = [
    {
        "key": "films",
        "values": [
            ("hand-drawn animated", "that old studio film about a bathhouse spirit"),
            ("slow-burn Scandinavian", "a Danish series about a detective in the rain"),
            ("1980s heist", "that classic bank-job movie with the synth soundtrack"),
        ],
        "hint": [
            "I rewatched {1} for the fourth time this month and still cried",
            "my partner groans every time I suggest {1} again",
        ],
        "ask": ["Can you recommend something to watch on Friday night?", "Any ideas for a movie for this weekend?"],
        "answer": "{0} films, like {1}",
    },
    {
        "key": "food",
        "values": [
            ("spicy Sichuan", "the chilli-oil noodles from the place downstairs"),
            ("Middle Eastern mezze", "the falafel and muhammara platter I get every payday"),
            ("Japanese comfort food", "a bowl of katsu curry after a long shift"),
        ],
        "hint": ["honestly the only thing that got me through Tuesday was {1}", "I've been craving {1} all week"],
        "ask": ["Could you suggest a dinner I could cook this weekend?", "What should I make for a dinner party?"],
        "answer": "{0} dishes (the user loves {1})",
    },
    {
        "key": "books",
        "values": [
            ("Nordic crime", "another grim Icelandic detective novel"),
            ("narrative history", "a thick book about the building of canals"),
            ("cosy fantasy", "a novel about a dragon who runs a tea shop"),
        ],
        "hint": ["I stayed up until two finishing {1}", "I always have {1} in my bag"],
        "ask": ["What should I read next?", "Can you recommend a book for my holiday?"],
        "answer": "{0} (recently read {1})",
    },
    {
        "key": "trips",
        "values": [
            ("remote outdoorsy camping", "I'd rather sleep in a tent by a lake than in any resort"),
            ("food-focused city breaks", "the best part of any trip for me is the market stalls"),
            ("quiet slow train journeys", "nothing beats watching the countryside from a train window"),
        ],
        "hint": ["{1}", "my friends laugh at me, but {1}"],
        "ask": [
            "Can you suggest a vacation idea for my time off in the autumn?",
            "Where should I go on my next break?",
        ],
        "answer": "{0}",
    },
    {
        "key": "music",
        "values": [
            ("1970s soul", "those old soul records with the horn sections"),
            ("ambient electronic", "long ambient tracks with no words while I work"),
            ("bluegrass", "fast fiddle-and-banjo tunes on Sunday mornings"),
        ],
        "hint": ["my neighbours must be sick of me playing {1}", "I've had {1} on repeat all week"],
        "ask": ["Could you put together a playlist for a long drive?", "Can you recommend some new artists for me?"],
        "answer": "{0} ({1})",
    },
    {
        "key": "exercise",
        "values": [
            ("climbing and bouldering", "I could spend hours on the wall figuring out a route"),
            ("dance-based workouts", "the only cardio I don't dread is dancing around the kitchen"),
            ("open-water swimming", "a cold lake swim is my favourite way to start a weekend"),
        ],
        "hint": ["I hate treadmills, but {1}", "{1}"],
        "ask": ["Can you recommend a fitness class I'd stick with?", "What sort of exercise would suit me?"],
        "answer": "{0}",
    },
]

# --- dated events for temporal questions ------------------------------------------------------------

EVENTS = [
    ("helped my cousin move into a fourth-floor flat", "help someone move house"),
    ("went to a jazz gig in a tiny basement bar", "go to a live music show"),
    ("took the ferry out to the island for a picnic", "go on a boat trip"),
    ("volunteered at the food bank sorting donations", "do volunteer work"),
    ("spent the whole day repainting the fence", "do a painting job outdoors"),
    ("went to a pottery open studio and made a lopsided bowl", "try ceramics"),
    ("ran a charity fun run dressed as a banana", "take part in a charity run"),
    ("drove out to the coast to see the seals", "go wildlife watching"),
    ("hosted a board game night for eight people", "host friends for games"),
    ("finally visited the new science museum", "visit a museum"),
]

STARTS = [
    ("started taking evening ceramics classes", "pottery course", "ceramics"),
    ("joined a Tuesday-night choir", "singing group", "choir"),
    ("began volunteering as a reading tutor", "tutoring", "reading tutor"),
    ("started a beginner Italian course", "Italian lessons", "Italian course"),
    ("signed up for a weekly life-drawing session", "art class", "life-drawing"),
    ("started learning to sail on the reservoir", "sailing lessons", "sail"),
]

REL_AGO = [
    (3, "three days ago"),
    (7, "a week ago"),
    (14, "two weeks ago"),
    (21, "three weeks ago"),
    (10, "ten days ago"),
]

# --- multi-session aggregation -------------------------------------------------------------------------

AGGREGATES: list[dict] = [
    {
        "key": "weddings",
        "items": [
            "my college roommate's wedding in a barn",
            "my cousin's beach wedding",
            "a coworker's courthouse wedding and lunch after",
            "my oldest friend's wedding abroad",
        ],
        "say": ["I'm still recovering from {0} at the weekend", "I was at {0} on Saturday and danced far too much"],
        "ask": "How many weddings have I been to over these months?",
        "answer": "count",
    },
    {
        "key": "bike",
        "items": [("a new chain", 45), ("two inner tubes", 18), ("brake pads", 30), ("a full service", 90)],
        "say": ["I had to pay {1} dollars for {0} at the bike shop", "{0} for the bike set me back {1} dollars"],
        "ask": "How much have I spent on bicycle repairs in total?",
        "answer": "sum",
    },
    {
        "key": "books",
        "items": [
            "a memoir by a retired astronaut",
            "a thriller set on an oil rig",
            "a short book about mushrooms",
            "a fat novel about a family restaurant",
        ],
        "say": ["I just finished {0} and need to talk about it", "I got through {0} on the plane"],
        "ask": "How many books have I told you I finished reading?",
        "answer": "count",
    },
    {
        "key": "trips",
        "items": ["Rotterdam", "Helsinki", "Porto", "Ljubljana"],
        "say": ["I'm just back from a work trip to {0}", "my company sent me to {0} for three days of meetings"],
        "ask": "Which cities did I travel to for business?",
        "answer": "list",
    },
    {
        "key": "plants",
        "items": [
            ("a fiddle-leaf fig", 38),
            ("a big monstera", 55),
            ("three small succulents", 12),
            ("a lemon tree", 64),
        ],
        "say": ["I splurged {1} dollars on {0} for the living room", "couldn't resist buying {0} for {1} dollars"],
        "ask": "What is the total I've paid for houseplants?",
        "answer": "sum",
    },
]

# --- things the assistant said (assistant recall) ---------------------------------------------------------

ASSISTANT_FACTS: dict[str, list[dict]] = {
    "cooking": [
        {
            "say": "For the dough itself, I'd go with {0} percent hydration, which is wet enough for big holes but still manageable by hand.",
            "values": ["68", "72", "75", "80"],
            "ask": "How much water relative to flour did you tell me to use in my bread?",
            "answer": "{0}% hydration",
        },
        {
            "say": "My go-to trick for this is a spoonful of {0} stirred in at the end; it adds depth nobody can quite place.",
            "values": ["white miso", "anchovy paste", "fish sauce", "marmite"],
            "ask": "What was the secret ingredient you suggested adding at the end?",
            "answer": "{0}",
        },
    ],
    "travel": [
        {
            "say": "If you have one free evening, take the {0} at sunset; it is the cheapest view in town.",
            "values": ["number 28 tram", "funicular up the hill", "harbour water-bus", "cable car"],
            "ask": "Which ride did you say to take in the evening for the view?",
            "answer": "the {0}",
        },
        {
            "say": "For a base, the {0} neighbourhood is my pick: quiet at night but close to everything.",
            "values": ["Alfama", "Oltrarno", "Kazimierz", "Gastown"],
            "ask": "What area did you recommend I stay in?",
            "answer": "{0}",
        },
    ],
    "code": [
        {
            "say": "I'd name the main helper `{0}` so its job is obvious from the call site.",
            "values": ["normalise_rows", "collect_dates", "safe_rename", "load_records"],
            "ask": "What function name did you propose for the main helper in my script?",
            "answer": "{0}",
        },
        {
            "say": "Pin the tool to version {0} in your requirements file so the hooks behave the same on every machine.",
            "values": ["4.2.1", "23.9.0", "1.7.3", "0.11.2"],
            "ask": "Which version number did you tell me to pin?",
            "answer": "{0}",
        },
    ],
    "finance": [
        {
            "say": "A rule of thumb I like here is the {0} split between needs, wants and savings.",
            "values": ["50/30/20", "60/20/20", "70/20/10"],
            "ask": "What percentage breakdown did you suggest for my money?",
            "answer": "{0}",
        },
        {
            "say": "Name the savings pot something motivating, like '{0}', so you think twice before dipping into it.",
            "values": ["Freedom Fund", "Future Me", "Rainy Day Castle", "Do Not Touch"],
            "ask": "What did you suggest calling my savings account?",
            "answer": "{0}",
        },
    ],
    "health": [
        {
            "say": "Try the {0} breathing pattern when you lie down: it slows your heart rate within a few cycles.",
            "values": ["4-7-8", "box (4-4-4-4)", "5-5 coherent"],
            "ask": "What breathing technique did you recommend for falling asleep?",
            "answer": "{0}",
        },
        {
            "say": "Set a hard stop for coffee at {0}; after that switch to something caffeine-free.",
            "values": ["11 am", "noon", "1 pm", "2 pm"],
            "ask": "What cut-off time for caffeine did you give me?",
            "answer": "{0}",
        },
    ],
    "fitness": [
        {
            "say": "A simple progression is the {0} ladder: add one rep per set each session until you hit the top.",
            "values": ["3-5-7", "5-8-12", "4-6-8"],
            "ask": "What rep scheme did you give me for getting stronger?",
            "answer": "the {0} ladder",
        },
        {
            "say": "Keep your easy days under {0} beats per minute, even if it feels embarrassingly slow.",
            "values": ["140", "145", "150", "135"],
            "ask": "What heart rate limit did you tell me for my easy training?",
            "answer": "{0} bpm",
        },
    ],
    "garden": [
        {
            "say": "A tomato variety that does well in pots is '{0}'; it stays compact and crops early.",
            "values": ["Balcony Gem", "Patio Ruby", "Little Sun", "Window Box Red"],
            "ask": "Which tomato type did you recommend for containers?",
            "answer": "'{0}'",
        },
        {
            "say": "Mix your own potting blend at {0} compost to grit for better drainage.",
            "values": ["3:1", "4:1", "2:1"],
            "ask": "What soil ratio did you suggest for my pots?",
            "answer": "{0} compost to grit",
        },
    ],
    "home": [
        {
            "say": "For that wall I'd use {0} anchors; they spread the load better than plastic plugs.",
            "values": ["toggle bolt", "spring toggle", "metal hollow-wall", "snap toggle"],
            "ask": "What kind of wall fixings did you tell me to buy?",
            "answer": "{0} anchors",
        },
        {
            "say": "Give the sealant {0} hours before you run the shower again.",
            "values": ["24", "36", "48"],
            "ask": "How long did you say I should wait before using the shower?",
            "answer": "{0} hours",
        },
    ],
    "career": [
        {
            "say": "Open with a one-line pitch like '{0}' and then give the evidence.",
            "values": [
                "I turn messy data into decisions",
                "I make complicated things simple for customers",
                "I ship small improvements every week",
            ],
            "ask": "What opening line did you suggest for introducing myself?",
            "answer": "'{0}'",
        },
        {
            "say": "Ask for a figure around {0} percent above the first offer and be ready to explain why.",
            "values": ["8", "10", "12", "15"],
            "ask": "By how much did you advise me to counter the salary offer?",
            "answer": "{0}%",
        },
    ],
    "music": [
        {
            "say": "Start the metronome at {0} bpm and only move up when you get three clean runs in a row.",
            "values": ["60", "66", "72", "80"],
            "ask": "What tempo did you say I should begin practising at?",
            "answer": "{0} bpm",
        },
        {
            "say": "A warm-up I like is the '{0}' exercise: a slow chromatic walk up and down the neck.",
            "values": ["spider walk", "ladder climb", "caterpillar"],
            "ask": "What was the name of the warm-up drill you showed me?",
            "answer": "the {0}",
        },
    ],
}

# --- filler the generator mixes in ---------------------------------------------------------------------

ELABORATIONS = [
    "One more note on {a}: it is worth getting right early, because fixing it later costs more.",
    "People often skip {a}, and it is usually the reason things go sideways a few weeks in.",
    "If {a} is not available, {b} is a reasonable stand-in for now.",
    "Give yourself about {n} tries before judging whether {a} works for you.",
    "It is tempting to buy more gear, but {a} is really all you need at this stage.",
    "A quick way to check your progress is to compare against where you were {n} weeks ago.",
    "The difference between {a} and {b} matters less than doing either one consistently.",
    "Think of {a} as the foundation; everything else builds on it.",
    "When in doubt, simplify: drop the extras and keep {a}.",
    "You will likely notice the biggest change from {a} within the first {n} days.",
    "Budget a little extra time for {a}, since it rarely goes exactly to plan the first time.",
    "I would not worry about {b} until {a} feels routine.",
]

USER_DETAILS = [
    "I already have {a} but not much else.",
    "I tried {a} once and it didn't really stick.",
    "I've heard mixed things about {a}.",
    "Ideally I'd like to avoid {a} if possible.",
    "Someone told me {a} is essential, is that true?",
    "I only have a weekend to sort this out.",
    "Budget is tight this month.",
    "I'd rather keep it simple than perfect.",
    "For context, I've been reading about {a} and {b} but I can't tell which matters more.",
    "I'm a complete beginner, so please don't assume I know the jargon.",
    "Last time I tried something like this I gave up after about {n} days, so I want a plan I'll actually follow.",
    "My schedule is all over the place at the moment, mornings are the only predictable time.",
    "I watched a couple of videos that made {a} look easy, but mine never turns out like that.",
    "I'd appreciate it if you could explain the why and not just the what.",
    "If it matters, I'm working with {a} and not much space.",
    "I've set aside around {n} hours for this over the next couple of weeks.",
]

TEMPORAL_DISTRACT = [
    "last month I mostly stayed in and slept",
    "a few weeks back I spent a whole Sunday cleaning",
    "at the start of the year I binge-watched a baking show",
    "the other week I did absolutely nothing all Saturday",
]

# --- two dated events for interval and ordering questions (generator version 2) ------------------------

PAIRED_EVENTS = [
    # (what the turn says happened, how a question names it, a turn that shares its words but is not it)
    (
        "had a molar filled at the dentist",
        "my dentist appointment",
        "my sister keeps putting off booking a dentist check-up",
    ),
    (
        "saw a string quartet play in the old church",
        "the classical concert",
        "a friend offered me tickets to a concert I couldn't make",
    ),
    (
        "renewed my passport at the town hall",
        "renewing my passport",
        "my partner's passport runs out sometime next year",
    ),
    (
        "took the car in for its annual inspection",
        "the car inspection",
        "the garage keeps emailing me about the car's service plan",
    ),
    (
        "did my first open-water swim in the lake",
        "my first lake swim",
        "a colleague swims in the lake all winter, which sounds insane",
    ),
    (
        "had the boiler serviced by a plumber",
        "the boiler service",
        "our neighbour's boiler broke down and they had no hot water",
    ),
    ("went to my niece's school play", "my niece's play", "my niece has been practising her lines for weeks"),
    (
        "got a flu jab at the pharmacy",
        "getting my flu vaccine",
        "the pharmacy down the road never has anything in stock",
    ),
    (
        "ran a 10K along the river in the rain",
        "the 10K race",
        "I keep meaning to sign up for another race at some point",
    ),
    (
        "moved my desk into the spare room and rewired the monitors",
        "rearranging my home office",
        "my home office is still a nest of cables",
    ),
    (
        "interviewed a candidate for the open analyst role",
        "the job interview I ran",
        "we still haven't filled the analyst role at work",
    ),
    (
        "baked a three-tier cake for my parents' anniversary",
        "baking the anniversary cake",
        "my parents' anniversary always sneaks up on me",
    ),
]

TOLD_AGO = [
    # (how the turn dates the event, days before the session)
    ("this morning", 0),
    ("yesterday", 1),
    ("the day before yesterday", 2),
    ("three days ago", 3),
    ("four days ago", 4),
    ("a week ago", 7),
]

INTERVAL_ASK = [
    "How many days passed between {a} and {b}?",
    "How many days were there between {a} and {b}?",
]

ORDER_ASK = ["Which happened first, {a} or {b}?", "Which came first: {a} or {b}?"]
